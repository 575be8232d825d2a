// Package fairslots shares a fixed number of slots (render workers, renders in
// flight) between tenants, so that one tenant with many requests cannot starve
// another.
package fairslots

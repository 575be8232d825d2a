// Package reconciler owns the sync engine: it turns a revision of the platform
// repository into cluster state (plan, render, apply, prune, health, report), keeps
// each instance's inventory and status, and maps every failure once into a typed
// condition.
package reconciler

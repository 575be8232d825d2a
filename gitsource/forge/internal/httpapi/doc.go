// Package httpapi is the JSON-over-HTTP client the forge backends share: base
// URL handling, path escaping, fixed headers (authentication among them),
// bounded responses, redirect policy, and errors that carry the HTTP status
// and rate-limit hints as forge.APIError with the token scrubbed out.
package httpapi

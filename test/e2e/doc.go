// Package e2e holds cairn's end-to-end tests: real Git repositories, a real API
// server with controllers and kwok, and a real registry, driven through the same engine
// the CLI uses.
package e2e

// Package providers lists the forges cairn ships: the one place a forge's
// package is registered. A new forge is a new package under gitsource/forge
// implementing forge.Provider and one line in Default.
package providers

import (
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
)

// Default returns a Registry of every forge cairn ships.
func Default() *forge.Registry {
	return forge.MustRegistry(
		gitea.Provider{},
		github.Provider{},
		gitlab.Provider{},
	)
}

// Package manifests owns the Kubernetes manifests cairn installs: its CRDs, embedded so
// that `cairn install` and the controller can apply them.
package manifests

import "embed"

// CRDs holds the generated CustomResourceDefinitions under crds/.
//
//go:embed crds/*.yaml
var CRDs embed.FS

//go:build tools

// Package deps pins the tool and library versions the build relies on.
package deps

import (
	_ "cuelang.org/go/cue"
	_ "github.com/fluxcd/pkg/runtime/conditions"
	_ "github.com/fluxcd/pkg/ssa"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/onsi/gomega"
	_ "github.com/spf13/cobra"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
)

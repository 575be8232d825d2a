package e2e

import (
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func isTrue(mi *cairnv1.ModuleInstance, t string) bool { return conditions.IsTrue(mi, t) }

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }

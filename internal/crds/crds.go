// Package crds reads CustomResourceDefinitions as unstructured objects: which
// objects are CRDs, and which kinds they define with their scope. The renderer
// (placing a render's objects) and the apply layer (what must be written before
// the objects that need it) share it, so the two never disagree on what a CRD
// defines.
package crds

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Is tells whether u is a CustomResourceDefinition of apiextensions.k8s.io.
func Is(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Kind == "CustomResourceDefinition" && gvk.Group == "apiextensions.k8s.io"
}

// Scopes returns the kinds the CRDs among objs define, each with whether it is
// namespaced. A CRD without a group of a domain's form or without a kind defines
// none (the API server refuses it anyway).
func Scopes(objs []*unstructured.Unstructured) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, u := range objs {
		if !Is(u) {
			continue
		}
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		if !strings.Contains(group, ".") || kind == "" {
			continue
		}
		scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
		out[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
	}
	return out
}

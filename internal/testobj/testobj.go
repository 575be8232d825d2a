// Package testobj owns the small Kubernetes objects the unit tests of several
// packages build: an object of a kind by apiVersion, namespace and name, and the
// CustomResourceDefinition of a kind. Tests only; the product never imports it.
package testobj

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Object is an object of kind at apiVersion, named name in namespace ("": none).
func Object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// CRD is a namespaced CustomResourceDefinition of group and kind, named x.<group>.
func CRD(group, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "x." + group},
		"spec":     map[string]any{"group": group, "scope": "Namespaced", "names": map[string]any{"kind": kind}},
	}}
}

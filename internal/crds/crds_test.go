package crds

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func crd(apiVersion, group, kind, scope string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "x"},
		"spec":     map[string]any{"group": group, "scope": scope, "names": map[string]any{"kind": kind}},
	}}
}

func TestScopesReadsTheKindsCRDsDefine(t *testing.T) {
	g := NewWithT(t)
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	objs := []*unstructured.Unstructured{
		crd("apiextensions.k8s.io/v1", "example.com", "Widget", "Namespaced"),
		crd("apiextensions.k8s.io/v1", "example.com", "Gadget", "Cluster"),
		crd("apiextensions.k8s.io/v1", "", "Secret", "Namespaced"),       // no group of a domain's form
		crd("apiextensions.k8s.io/v1", "example.com", "", "Namespaced"),  // no kind
		crd("other.example.com/v1", "example.com", "Fake", "Namespaced"), // not apiextensions' CRD
		cm,
	}
	g.Expect(Scopes(objs)).To(Equal(map[schema.GroupKind]bool{
		{Group: "example.com", Kind: "Widget"}: true,
		{Group: "example.com", Kind: "Gadget"}: false,
	}))
	g.Expect(Is(objs[0])).To(BeTrue())
	g.Expect(Is(objs[4])).To(BeFalse())
	g.Expect(Is(cm)).To(BeFalse())
}

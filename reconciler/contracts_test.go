package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func crdObject(group, kind string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "x." + group},
		"spec":     map[string]any{"group": group, "scope": "Namespaced", "names": map[string]any{"kind": kind}},
	}}
}

func kindObject(apiVersion, kind, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name},
	}}
}

func TestInferContracts(t *testing.T) {
	cert := schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	issuer := schema.GroupKind{Group: "cert-manager.io", Kind: "Issuer"}
	widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	tests := []struct {
		name      string
		objects   map[string][]*unstructured.Unstructured
		provides  map[string][]schema.GroupKind
		requires  map[string]map[string][]schema.GroupKind
		conflicts map[schema.GroupKind][]string
	}{{
		name: "a requirer of two kinds of one provider, and an instance of built-in kinds only",
		objects: map[string][]*unstructured.Unstructured{
			"infra/cert-manager": {crdObject("cert-manager.io", "Issuer"), crdObject("cert-manager.io", "Certificate"), kindObject("apps/v1", "Deployment", "cm")},
			"team-a/web":         {kindObject("cert-manager.io/v1", "Certificate", "web"), kindObject("cert-manager.io/v1", "Issuer", "ca"), kindObject("cert-manager.io/v1", "Certificate", "api")},
			"team-b/plain":       {kindObject("v1", "ConfigMap", "c")},
		},
		provides: map[string][]schema.GroupKind{"infra/cert-manager": {cert, issuer}},
		requires: map[string]map[string][]schema.GroupKind{"team-a/web": {"infra/cert-manager": {cert, issuer}}},
	}, {
		name: "an instance that renders its own CRD and resources of it requires nothing",
		objects: map[string][]*unstructured.Unstructured{
			"ns/self": {kindObject("example.com/v1", "Widget", "w"), crdObject("example.com", "Widget")},
		},
		provides: map[string][]schema.GroupKind{"ns/self": {widget}},
		requires: map[string]map[string][]schema.GroupKind{},
	}, {
		name: "two providers of one kind conflict, and nobody requires either for it",
		objects: map[string][]*unstructured.Unstructured{
			"a/one": {crdObject("example.com", "Widget")},
			"b/two": {crdObject("example.com", "Widget")},
			"c/use": {kindObject("example.com/v1", "Widget", "w")},
		},
		provides:  map[string][]schema.GroupKind{"a/one": {widget}, "b/two": {widget}},
		requires:  map[string]map[string][]schema.GroupKind{},
		conflicts: map[schema.GroupKind][]string{widget: {"a/one", "b/two"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := inferContracts(tt.objects)
			g.Expect(c.provides).To(Equal(tt.provides))
			g.Expect(c.requires).To(Equal(tt.requires))
			if tt.conflicts == nil {
				tt.conflicts = map[schema.GroupKind][]string{}
			}
			g.Expect(c.conflicts).To(Equal(tt.conflicts))
		})
	}
}

func TestContractsRequirersAndProviders(t *testing.T) {
	g := NewWithT(t)
	c := inferContracts(map[string][]*unstructured.Unstructured{
		"infra/p": {crdObject("example.com", "Widget")},
		"z/b":     {kindObject("example.com/v1", "Widget", "w")},
		"a/a":     {kindObject("example.com/v2", "Widget", "w")},
	})
	g.Expect(c.providers("a/a")).To(Equal([]string{"infra/p"}))
	g.Expect(c.providers("z/b")).To(Equal([]string{"infra/p"}))
	g.Expect(c.providers("infra/p")).To(BeEmpty())

	// An instance not rendered this time keeps the requirements its status
	// records while the provider still provides the kind.
	c.recall("y/c", []cairnv1.ContractRequirement{
		{Instance: "infra/p", Kinds: []string{"Widget.example.com"}},
		{Instance: "infra/gone", Kinds: []string{"Gadget.example.com"}},
		{Instance: "a/a", Kinds: []string{"Widget.example.com"}}, // not its provider now
	})
	g.Expect(c.requirements("y/c")).To(Equal([]cairnv1.ContractRequirement{{Instance: "infra/p", Kinds: []string{"Widget.example.com"}}}))
}

func TestStronglyConnected(t *testing.T) {
	g := NewWithT(t)
	g.Expect(stronglyConnected(map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil})).To(BeEmpty())
	g.Expect(stronglyConnected(map[string][]string{
		"x/web": {"x/db"}, "x/db": {"x/web"}, // a dependsOn and a contract edge
		"y/a": {"y/b"}, "y/b": {"y/c"}, "y/c": {"y/a"}, "y/d": {"y/a"},
	})).To(Equal([][]string{{"x/db", "x/web"}, {"y/a", "y/b", "y/c"}}))
}

func TestProviderVerdict(t *testing.T) {
	ready := &InstanceOutcome{SatisfiesDependents: true}
	progressing := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionProgressing}}
	failed := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionFailed}}
	tests := []struct {
		name    string
		dep     dependencyState
		pending bool
		message string
	}{
		{name: "ready provider", dep: dependencyState{key: "infra/p", declared: true, outcome: ready, kinds: []string{"W.x"}}},
		{name: "no outcome yet", dep: dependencyState{key: "infra/p", declared: true, kinds: []string{"W.x"}}, pending: true},
		{name: "progressing", dep: dependencyState{key: "infra/p", declared: true, outcome: progressing, kinds: []string{"W.x"}},
			message: "provider infra/p of W.x is progressing: applied, not yet healthy"},
		{name: "failed", dep: dependencyState{key: "infra/p", declared: true, outcome: failed, kinds: []string{"W.x", "V.x"}},
			message: "provider infra/p of W.x, V.x is not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f, pending := dependencyVerdict([]dependencyState{tt.dep})
			g.Expect(pending).To(Equal(tt.pending))
			if tt.message == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Reason).To(Equal("ProviderNotReady"))
			g.Expect(f.Err).To(MatchError(tt.message))
		})
	}
}

package contracts

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
	"cairn.dev/cairn/internal/testobj"
)

var widgetGK = schema.GroupKind{Group: "example.com", Kind: "Widget"}

func widgets(names ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, n := range names {
		out = append(out, testobj.Object("example.com/v1", "Widget", "", n))
	}
	return out
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
			"infra/cert-manager": {testobj.CRD("cert-manager.io", "Issuer"), testobj.CRD("cert-manager.io", "Certificate"), testobj.Object("apps/v1", "Deployment", "", "cm")},
			"team-a/web":         {testobj.Object("cert-manager.io/v1", "Certificate", "", "web"), testobj.Object("cert-manager.io/v1", "Issuer", "", "ca"), testobj.Object("cert-manager.io/v1", "Certificate", "", "api")},
			"team-b/plain":       {testobj.Object("v1", "ConfigMap", "", "c")},
		},
		provides: map[string][]schema.GroupKind{"infra/cert-manager": {cert, issuer}},
		requires: map[string]map[string][]schema.GroupKind{"team-a/web": {"infra/cert-manager": {cert, issuer}}},
	}, {
		name: "an instance that renders its own CRD and resources of it requires nothing",
		objects: map[string][]*unstructured.Unstructured{
			"ns/self": {testobj.Object("example.com/v1", "Widget", "", "w"), testobj.CRD("example.com", "Widget")},
		},
		provides: map[string][]schema.GroupKind{"ns/self": {widget}},
		requires: map[string]map[string][]schema.GroupKind{},
	}, {
		name: "two providers of one kind conflict, and nobody requires either for it",
		objects: map[string][]*unstructured.Unstructured{
			"a/one": {testobj.CRD("example.com", "Widget")},
			"b/two": {testobj.CRD("example.com", "Widget")},
			"c/use": {testobj.Object("example.com/v1", "Widget", "", "w")},
		},
		provides:  map[string][]schema.GroupKind{"a/one": {widget}, "b/two": {widget}},
		requires:  map[string]map[string][]schema.GroupKind{},
		conflicts: map[schema.GroupKind][]string{widget: {"a/one", "b/two"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := Infer(tt.objects, nil)
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
	c := Infer(map[string][]*unstructured.Unstructured{
		"infra/p": {testobj.CRD("example.com", "Widget")},
		"z/b":     {testobj.Object("example.com/v1", "Widget", "", "w")},
		"a/a":     {testobj.Object("example.com/v2", "Widget", "", "w")},
	}, nil)
	g.Expect(c.Providers("a/a")).To(Equal([]string{"infra/p"}))
	g.Expect(c.Providers("z/b")).To(Equal([]string{"infra/p"}))
	g.Expect(c.Providers("infra/p")).To(BeEmpty())

	// An instance not rendered this time keeps the requirements its status
	// records while the provider still provides the kind.
	c.Recall("y/c", []cairnv1.ContractRequirement{
		{Instance: "infra/p", Kinds: []string{"Widget.example.com"}},
		{Instance: "infra/gone", Kinds: []string{"Gadget.example.com"}},
		{Instance: "a/a", Kinds: []string{"Widget.example.com"}}, // not its provider now
	})
	g.Expect(c.Requirements("y/c")).To(Equal([]cairnv1.ContractRequirement{{Instance: "infra/p", Kinds: []string{"Widget.example.com"}}}))
}

func TestCycles(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Cycles(map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil})).To(BeEmpty())
	g.Expect(Cycles(map[string][]string{
		"x/web": {"x/db"}, "x/db": {"x/web"}, // a dependsOn and a contract edge
		"y/a": {"y/b"}, "y/b": {"y/c"}, "y/c": {"y/a"}, "y/d": {"y/a"},
	})).To(Equal([][]string{{"x/db", "x/web"}, {"y/a", "y/b", "y/c"}}))
}

// TestInferContractsWithRecordedKinds: the kinds the status of an instance not
// rendered this time records are provided as a render's CRDs are; a render that
// brings the CRD of such a kind conflicts with it, unless it is the same instance.
func TestInferContractsWithRecordedKinds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		objects    map[string][]*unstructured.Unstructured
		provided   map[string][]schema.GroupKind
		providerOf map[schema.GroupKind]string
		requires   map[string]map[string][]schema.GroupKind
		conflicts  map[schema.GroupKind][]string
	}{{
		name:       "a provider not rendered this time is required by its status",
		objects:    map[string][]*unstructured.Unstructured{"b/use": widgets("w")},
		provided:   map[string][]schema.GroupKind{"a/prov": {widgetGK}},
		providerOf: map[schema.GroupKind]string{widgetGK: "a/prov"},
		requires:   map[string]map[string][]schema.GroupKind{"b/use": {"a/prov": {widgetGK}}},
		conflicts:  map[schema.GroupKind][]string{},
	}, {
		name:       "a provider that keeps a kind its render dropped and renders it too is no conflict",
		objects:    map[string][]*unstructured.Unstructured{"a/prov": {testobj.CRD("example.com", "Widget")}, "b/use": widgets("w")},
		provided:   map[string][]schema.GroupKind{"a/prov": {widgetGK}},
		providerOf: map[schema.GroupKind]string{widgetGK: "a/prov"},
		requires:   map[string]map[string][]schema.GroupKind{"b/use": {"a/prov": {widgetGK}}},
		conflicts:  map[schema.GroupKind][]string{},
	}, {
		name:       "a render that brings a kind another instance's status records conflicts, recorded one first",
		objects:    map[string][]*unstructured.Unstructured{"c/new": {testobj.CRD("example.com", "Widget")}, "b/use": widgets("w")},
		provided:   map[string][]schema.GroupKind{"z/old": {widgetGK}},
		providerOf: map[schema.GroupKind]string{widgetGK: "z/old"},
		requires:   map[string]map[string][]schema.GroupKind{},
		conflicts:  map[schema.GroupKind][]string{widgetGK: {"z/old", "c/new"}},
	}, {
		name:       "an empty kind recorded is no kind",
		objects:    map[string][]*unstructured.Unstructured{"b/use": widgets("w")},
		provided:   map[string][]schema.GroupKind{"a/prov": {{Group: "example.com"}}},
		providerOf: map[schema.GroupKind]string{},
		requires:   map[string]map[string][]schema.GroupKind{},
		conflicts:  map[schema.GroupKind][]string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := Infer(tc.objects, tc.provided)
			g.Expect(c.providerOf).To(Equal(tc.providerOf))
			g.Expect(c.requires).To(Equal(tc.requires))
			g.Expect(c.conflicts).To(Equal(tc.conflicts))
		})
	}
}

// TestUnserved: an instance waits only for the kinds its providers have not
// served yet, as their status.provides records.
func TestUnserved(t *testing.T) {
	objects := map[string][]*unstructured.Unstructured{
		"infra/prov": {testobj.CRD("example.com", "Widget"), testobj.CRD("example.com", "Gadget")},
		"team/use":   append(widgets("w"), testobj.Object("example.com/v1", "Gadget", "", "g")),
	}
	c := Infer(objects, nil)
	for _, tc := range []struct {
		name   string
		served []string
		want   []cairnv1.ContractRequirement
	}{
		{name: "a new provider: every kind",
			want: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{"Gadget.example.com", "Widget.example.com"}}}},
		{name: "served one kind: the other", served: []string{"Widget.example.com"},
			want: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{"Gadget.example.com"}}}},
		{name: "served both: none", served: []string{"Gadget.example.com", "Widget.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := c.Unserved("team/use", func(p string) []string {
				g.Expect(p).To(Equal("infra/prov"))
				return tc.served
			})
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestRequiresKinds(t *testing.T) {
	g := NewWithT(t)
	live := &cairnv1.ModuleInstance{Status: cairnv1.ModuleInstanceStatus{Requires: []cairnv1.ContractRequirement{
		{Instance: "infra/prov", Kinds: []string{"Widget.example.com"}}}}}
	g.Expect(RequiresKinds(live, "infra/prov", map[schema.GroupKind]bool{widgetGK: true})).To(BeTrue())
	g.Expect(RequiresKinds(live, "infra/other", map[schema.GroupKind]bool{widgetGK: true})).To(BeFalse())
	g.Expect(RequiresKinds(live, "infra/prov", map[schema.GroupKind]bool{{Group: "example.com", Kind: "Gadget"}: true})).To(BeFalse())
}

func TestEdgesAndConflicts(t *testing.T) {
	g := NewWithT(t)
	c := Infer(map[string][]*unstructured.Unstructured{
		"infra/prov": {testobj.CRD("example.com", "Widget")},
		"team/use":   widgets("w"),
		"a/one":      {testobj.CRD("example.org", "Gadget")},
		"b/two":      {testobj.CRD("example.org", "Gadget")},
	}, nil)
	g.Expect(c.Edges()).To(Equal([]graph.Edge{{From: "team/use", To: "infra/prov", Kind: graph.Contract, Label: "Widget.example.com"}}))
	gadget := schema.GroupKind{Group: "example.org", Kind: "Gadget"}
	g.Expect(c.Conflicts()).To(Equal([]schema.GroupKind{gadget}))
	g.Expect(c.Conflicting(gadget)).To(Equal([]string{"a/one", "b/two"}))
	g.Expect(c.ProviderOf(widgetGK)).To(Equal("infra/prov"))
	g.Expect(c.ProviderOf(schema.GroupKind{Kind: "ConfigMap"})).To(BeEmpty())
	g.Expect(c.ProvidedNames("infra/prov")).To(Equal([]string{"Widget.example.com"}))
	g.Expect(ParseKindNames([]string{"Widget.example.com", ".nokind", "ConfigMap"})).To(Equal(
		[]schema.GroupKind{widgetGK, {Kind: "ConfigMap"}}))
}

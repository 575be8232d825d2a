package reconciler

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/outcome"
)

// countingMapper serves only ConfigMap and counts its lookups.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

func TestMissMemoAsksOncePerKindNotServed(t *testing.T) {
	g := NewWithT(t)
	base := meta.NewDefaultRESTMapper(nil)
	base.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	inner := &countingMapper{RESTMapper: base}
	m := newMissMemo(inner)
	widget := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	for range 3 {
		_, err := m.RESTMapping(widget, "v1")
		g.Expect(meta.IsNoMatchError(err)).To(BeTrue())
	}
	g.Expect(inner.calls).To(Equal(1), "a kind not served is asked once")
	for range 2 {
		mapping, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mapping.Scope.Name()).To(Equal(meta.RESTScopeNameNamespace))
	}
	g.Expect(inner.calls).To(Equal(3), "served kinds are the mapper's to cache")
}

func TestSetScopeTakesTheClustersScopeOfAServedKind(t *testing.T) {
	g := NewWithT(t)
	base := meta.NewDefaultRESTMapper(nil)
	crb := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	base.Add(crb, meta.RESTScopeRoot)
	mapper := newMissMemo(base)
	widget := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	crds := map[schema.GroupKind]bool{crb.GroupKind(): true, widget.GroupKind(): true} // both declared namespaced

	u := testobj.Object(crb.GroupVersion().String(), crb.Kind, "", "admin")
	u.SetNamespace("team-a")
	namespaced, err := setScope(u, "team-a", mapper, crds)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namespaced).To(BeFalse(), "the cluster serves ClusterRoleBinding cluster-scoped, whatever a CRD says")
	g.Expect(u.GetNamespace()).To(BeEmpty())

	w := testobj.Object(widget.GroupVersion().String(), widget.Kind, "", "w")
	namespaced, err = setScope(w, "team-a", mapper, crds)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(namespaced).To(BeTrue(), "a kind not served yet takes its CRD's scope")
	g.Expect(w.GetNamespace()).To(Equal("team-a"))

	_, err = setScope(testobj.Object("nobody.example.com/v1", "Gadget", "", "x"), "team-a", mapper, crds)
	g.Expect(err).To(MatchError(ContainSubstring("does not serve")))
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Reason).To(Equal(cairnv1.ReasonKindNotServed))
}

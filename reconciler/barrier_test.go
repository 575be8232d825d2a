package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/apply"
)

// TestMayApplyAlone: which placed renders apply without waiting for the render
// barrier, and the contracts such an instance records.
func TestMayApplyAlone(t *testing.T) {
	cm := func(name string) *unstructured.Unstructured {
		u := testobj.Object("v1", "ConfigMap", "", name)
		u.SetNamespace("team")
		return u
	}
	crd := testobj.CRD("example.com", "Widget")
	widget := testobj.Object("example.com/v1", "Widget", "", "w")
	widget.SetNamespace("team")
	for _, tc := range []struct {
		name     string
		objects  []*unstructured.Unstructured
		old      []*unstructured.Unstructured // its last inventory
		others   []contractRun
		alone    bool
		requires []cairnv1.ContractRequirement
		provides []string
	}{{
		name:    "a new instance of served kinds",
		objects: []*unstructured.Unstructured{cm("a"), cm("b")},
		alone:   true,
	}, {
		name:    "new content and new objects beside those it owns",
		objects: []*unstructured.Unstructured{cm("a"), cm("b")},
		old:     []*unstructured.Unstructured{cm("a")},
		alone:   true,
	}, {
		name:    "an object left its render: the prune verdicts need every render",
		objects: []*unstructured.Unstructured{cm("a")},
		old:     []*unstructured.Unstructured{cm("a"), cm("b")},
	}, {
		name:    "an empty render of an instance that had objects",
		objects: []*unstructured.Unstructured{},
		old:     []*unstructured.Unstructured{cm("a")},
	}, {
		name:    "a CRD it did not apply before: a conflict needs every render",
		objects: []*unstructured.Unstructured{crd},
	}, {
		name:     "a CRD it applied before: it goes on providing the kind",
		objects:  []*unstructured.Unstructured{crd, widget},
		old:      []*unstructured.Unstructured{crd},
		alone:    true,
		provides: []string{widgetKind},
	}, {
		name:    "a CRD it applied before that another instance's CR records providing",
		objects: []*unstructured.Unstructured{crd},
		old:     []*unstructured.Unstructured{crd},
		others:  []contractRun{{key: "infra/prov", provides: []string{widgetKind}}},
	}, {
		name:     "a kind another instance provides: it records the requirement",
		objects:  []*unstructured.Unstructured{widget},
		others:   []contractRun{{key: "infra/prov", provides: []string{widgetKind}, unchanged: true}},
		alone:    true,
		requires: []cairnv1.ContractRequirement{{Instance: "infra/prov", Kinds: []string{widgetKind}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := contractsFixture(append([]contractRun{{key: "team/app", objects: tc.objects}}, tc.others...)...)
			r := s.byKey["team/app"]
			r.oldInv = apply.InventoryOf(tc.old, nil)
			g.Expect(s.mayApplyAlone(r)).To(Equal(tc.alone))
			if !tc.alone {
				g.Expect(r.contracts).To(BeNil())
				return
			}
			r.fast = true
			provides, requires := s.recordedContracts(r.key(), &r.instanceVerdicts)
			g.Expect(provides).To(Equal(tc.provides))
			g.Expect(requires).To(Equal(tc.requires))
			g.Expect(s.pendingProviders(r)).To(BeEmpty())
		})
	}
}

// TestClaimObjects: in a sync, the first instance to claim an object keeps it and
// another that renders it fails naming the first, unless its inventory holds the
// object; CRDs are left to the contracts, and generated Secrets are claimed too.
func TestClaimObjects(t *testing.T) {
	shared := testobj.Object("v1", "ConfigMap", "", "shared")
	shared.SetNamespace("team")
	crd := testobj.CRD("example.com", "Widget")
	secret := &cairnv1.GeneratedSecret{Name: "db"}
	for _, tc := range []struct {
		name     string
		first    []*unstructured.Unstructured
		second   []*unstructured.Unstructured
		owns     bool // the second's inventory holds the shared object
		secrets  bool // both generate the Secret team/db
		conflict string
	}{{
		name:     "the second to render a new object fails naming the first",
		first:    []*unstructured.Unstructured{shared},
		second:   []*unstructured.Unstructured{shared},
		conflict: "ConfigMap/team/shared is rendered by this instance and by team/one in the same revision: an object belongs to one instance",
	}, {
		name:   "an instance whose inventory holds the object keeps it",
		first:  []*unstructured.Unstructured{shared},
		second: []*unstructured.Unstructured{shared},
		owns:   true,
	}, {
		name:   "a CRD is not claimed: two providers are a contract conflict",
		first:  []*unstructured.Unstructured{crd},
		second: []*unstructured.Unstructured{crd},
	}, {
		name:     "a generated Secret is claimed",
		secrets:  true,
		conflict: "Secret/team/db is rendered by this instance and by team/one in the same revision",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := contractsFixture(contractRun{key: "team/one"}, contractRun{key: "team/two"})
			s.claims = map[string]*instanceState{}
			one, two := s.byKey["team/one"], s.byKey["team/two"]
			if tc.secrets {
				one.mi.Spec.Secrets = []cairnv1.GeneratedSecret{*secret}
				two.mi.Spec.Secrets = []cairnv1.GeneratedSecret{*secret}
			}
			if tc.owns {
				two.oldInv = apply.InventoryOf([]*unstructured.Unstructured{shared}, nil)
			}
			g.Expect(s.claimObjects(one, tc.first)).To(BeNil())
			f := s.claimObjects(two, tc.second)
			if tc.conflict == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Reason).To(Equal(cairnv1.ReasonOwnershipConflict))
			g.Expect(f.Error()).To(ContainSubstring(tc.conflict))
			for id, by := range s.claims {
				g.Expect(by).To(BeIdenticalTo(one), "%s: nothing is claimed by the one that failed", id)
			}
		})
	}
}

package reconciler

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/render"
)

func configMap(ns, name string) *unstructured.Unstructured {
	return testobj.Object("v1", "ConfigMap", ns, name)
}

// ids are the inventory ids of objs, sorted.
func ids(objs ...*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, apply.ObjectID(u))
	}
	slices.Sort(out)
	return out
}

// prunePhaseFixture is planFixture's sync once its renders are done: each instance
// of last has a CR whose inline inventory holds those objects, and each of renders
// (the others are not rendered this time) rendered those. Its engine's client is
// c, which each instance's identity (the default, cairn's own) uses too.
func prunePhaseFixture(t *testing.T, c client.Client, last, renders map[string][]*unstructured.Unstructured) *RevisionState {
	s := planFixture(t, []string{})
	s.platform, s.managed = s.set.Platform, map[schema.GroupKind]managedObjects{}
	s.e = &Engine{cluster: &Cluster{client: c, managers: map[string]*ssa.ResourceManager{"": ssa.NewResourceManager(c, nil, ssa.Owner{})}}}
	for _, mi := range s.set.Instances {
		key := mi.Namespace + "/" + mi.Name
		r := &instanceState{instancePlan: instancePlan{mi: mi}}
		if objs, ok := last[key]; ok {
			r.was = synced(s, mi.Namespace, mi.Name)
			r.was.Status.Inventory = &cairnv1.Inventory{Entries: apply.InventoryOf(objs, nil).Entries()}
			s.live[key] = r.was
		}
		if objs, ok := renders[key]; ok {
			r.affected, r.rendered, r.objects, r.shape = true, &render.Result{}, objs, shapeOf(objs)
		}
		s.runs = append(s.runs, r)
		s.byKey[key] = r
	}
	return s
}

// TestPrunePhase runs the prune verdicts of a sync (checkPrunes) over the renders
// and the last inventories: what each instance would delete, what it keeps, and
// which guard refuses it.
func TestPrunePhase(t *testing.T) {
	a, b, x := configMap("team-a", "a"), configMap("team-a", "b"), configMap("team-b", "x")
	ns := testobj.Object("v1", "Namespace", "", "team-a-extra")
	web, db := "team-a/web", "team-a/db"
	for _, tc := range []struct {
		name    string
		last    map[string][]*unstructured.Unstructured
		renders map[string][]*unstructured.Unstructured
		edit    func(s *RevisionState)
		stale   map[string][]string // instance -> what it would delete; absent: no prune set
		kept    map[string][]string // instance -> protected objects left in place
		orphan  map[string][]string // removed instance -> what it orphans
		refused map[string]string   // instance -> the guard that refuses its prune
		message map[string]string   // instance -> part of its refusal
		syncErr int                 // sync-wide refusals
	}{{
		name:    "what left the render is deleted",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		stale:   map[string][]string{web: ids(b)},
	}, {
		name:    "an object that moves to another instance is transferred, not deleted",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}, db: {}},
		renders: map[string][]*unstructured.Unstructured{web: {a}, db: {b}},
		stale:   map[string][]string{web: nil, db: nil},
	}, {
		name:    "a new instance has nothing to prune",
		renders: map[string][]*unstructured.Unstructured{web: {a}},
	}, {
		name:    "an instance not rendered this time is not pruned",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{db: {b}},
	}, {
		name:    "an empty render would delete everything: refused",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{web: nil},
		refused: map[string]string{web: prune.LimitEmptyRender},
		message: map[string]string{web: "prune refused: the render is empty and would delete all 2 objects; set spec.allowEmpty to allow it"},
	}, {
		name:    "an empty render is refused even when spec.secrets generates Secrets",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{web: nil},
		edit: func(s *RevisionState) {
			s.byKey[web].mi.Spec.Secrets = []cairnv1.GeneratedSecret{{Name: "db-password"}}
		},
		refused: map[string]string{web: prune.LimitEmptyRender},
		message: map[string]string{web: "prune refused: the render is empty and would delete all 2 objects; set spec.allowEmpty to allow it"},
	}, {
		name:    "an empty render with allowEmpty deletes everything",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{web: nil},
		edit:    func(s *RevisionState) { s.byKey[web].mi.Spec.AllowEmpty = true },
		stale:   map[string][]string{web: ids(a, b)},
	}, {
		name:    "protected kinds are kept",
		last:    map[string][]*unstructured.Unstructured{web: {a, b, ns}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		stale:   map[string][]string{web: ids(b)},
		kept:    map[string][]string{web: ids(ns)},
	}, {
		name:    "protected kinds are deleted when the instance opts in",
		last:    map[string][]*unstructured.Unstructured{web: {a, b, ns}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		edit:    func(s *RevisionState) { s.byKey[web].mi.Spec.PruneProtected = true },
		stale:   map[string][]string{web: ids(b, ns)},
	}, {
		name:    "prune: false deletes nothing",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		edit:    func(s *RevisionState) { no := false; s.byKey[web].mi.Spec.Prune = &no },
	}, {
		name:    "over maxPercent: the instance is refused",
		last:    map[string][]*unstructured.Unstructured{web: {a, b, x}},
		renders: map[string][]*unstructured.Unstructured{web: {x}},
		edit:    func(s *RevisionState) { s.guard = guardOf(cairnv1.PrunePolicy{MaxPercent: ptr.To[int32](50)}) },
		stale:   map[string][]string{web: ids(a, b)},
		refused: map[string]string{web: prune.LimitMaxPercent},
		message: map[string]string{web: "instance team-a.web would lose 2 of its 3 objects (66%), over prune.maxPercent 50%"},
	}, {
		name:    "over maxDeletions: the instances that delete are refused, the others not",
		last:    map[string][]*unstructured.Unstructured{web: {a, b}, db: {x}},
		renders: map[string][]*unstructured.Unstructured{web: nil, db: {x}},
		edit: func(s *RevisionState) {
			s.guard = guardOf(cairnv1.PrunePolicy{MaxDeletions: ptr.To[int32](1)})
			s.byKey[web].mi.Spec.AllowEmpty = true
		},
		stale:   map[string][]string{web: ids(a, b), db: nil},
		refused: map[string]string{web: prune.LimitMaxDeletions},
		message: map[string]string{web: "this sync would delete 2 objects, over prune.maxDeletions 1"},
		syncErr: 1,
	}, {
		name:    "a removed instance deletes its inventory, less what another renders now",
		last:    map[string][]*unstructured.Unstructured{web: {}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		edit:    func(s *RevisionState) { s.removed = append(s.removed, removedCR(s, "gone", true, a, b)) },
		stale:   map[string][]string{web: nil, "team-a/gone": ids(b)},
	}, {
		name:    "a removed instance with prune: false orphans its objects",
		last:    map[string][]*unstructured.Unstructured{web: {}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		edit:    func(s *RevisionState) { s.removed = append(s.removed, removedCR(s, "gone", false, a, b)) },
		stale:   map[string][]string{web: nil, "team-a/gone": nil},
		orphan:  map[string][]string{"team-a/gone": ids(b)},
	}, {
		name:    "more than half of the instances removed: refused",
		last:    map[string][]*unstructured.Unstructured{web: {a}},
		renders: map[string][]*unstructured.Unstructured{web: {a}},
		edit: func(s *RevisionState) {
			s.removed = append(s.removed, removedCR(s, "gone", true, a, b), removedCR(s, "gone-too", true, x))
		},
		stale:   map[string][]string{web: nil, "team-a/gone": ids(b), "team-a/gone-too": ids(x)},
		refused: map[string]string{"team-a/gone": prune.LimitHalfOfInstances, "team-a/gone-too": prune.LimitHalfOfInstances},
		message: map[string]string{"team-a/gone": "this commit removes 2 of 3 instances, more than half"},
		syncErr: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := prunePhaseFixture(t, fake.NewClientBuilder().WithScheme(Scheme).Build(), tc.last, tc.renders)
			s.guard = prune.NewGuard(s.set.Platform, "")
			if tc.edit != nil {
				tc.edit(s)
			}
			s.readOnly = true // no metrics
			s.checkPrunes(context.Background())

			g.Expect(s.pruneErrs).To(HaveLen(tc.syncErr))
			sets := map[string]*prune.Set{}
			refusals := map[string]error{}
			for _, r := range s.runs {
				g.Expect(r.failure).To(BeNil(), r.key())
				if r.prune != nil {
					sets[r.key()] = r.prune
				}
				if err := s.pruneRefusal(&r.instanceVerdicts); err != nil {
					refusals[r.key()] = err
				}
			}
			for key, rs := range s.removedSets {
				g.Expect(rs.err).NotTo(HaveOccurred())
				sets[key] = rs.Set
				g.Expect(inventoryIDs(rs.orphan)).To(Equal(tc.orphan[key]), "%s orphans", key)
				if rs.Refused != nil {
					refusals[key] = rs.Refused
				}
			}
			g.Expect(sets).To(HaveLen(len(tc.stale)), "the instances with a prune set")
			for key, want := range tc.stale {
				g.Expect(sets).To(HaveKey(key))
				g.Expect(inventoryIDs(sets[key].Stale)).To(Equal(want), "%s deletes", key)
				g.Expect(sets[key].Kept).To(Equal(tc.kept[key]), "%s keeps", key)
			}
			g.Expect(refusals).To(HaveLen(len(tc.refused)))
			for key, limit := range tc.refused {
				g.Expect(refusals).To(HaveKey(key))
				g.Expect(prune.RefusedBy(refusals[key])).To(Equal(limit), key)
				g.Expect(refusals[key]).To(MatchError(ContainSubstring(tc.message[key])), key)
			}
		})
	}
}

// removedCR is the CR of team-a/<name>, which left Git, with objs as its inventory.
func removedCR(s *RevisionState, name string, prune bool, objs ...*unstructured.Unstructured) *cairnv1.ModuleInstance {
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: "uid-" + types.UID(name)}}
	mi.Spec.Prune = &prune
	mi.Status.Inventory = &cairnv1.Inventory{Entries: apply.InventoryOf(objs, nil).Entries()}
	s.live["team-a/"+name] = mi
	return mi
}

// inventoryIDs are the ids of inv, sorted (nil when empty).
func inventoryIDs(inv apply.Inventory) []string { return slices.Sorted(maps.Keys(inv)) }

// TestAWithdrawnKindInUseKeepsItsCRD: a provider whose render drops the CRD of a
// kind another instance still uses keeps the CRD (not pruned, not even as a
// protected kind), says so, and goes on providing the kind; a dropped CRD nobody
// uses is left to the prune guards (kept as a protected kind).
func TestAWithdrawnKindInUseKeepsItsCRD(t *testing.T) {
	sch := runtime.NewScheme()
	NewWithT(t).Expect(apiextensionsv1.AddToScheme(sch)).To(Succeed())
	NewWithT(t).Expect(cairnv1.AddToScheme(sch)).To(Succeed())
	liveCRD := func(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + ".example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: "Namespaced",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural}}}
	}
	widgetsCRD := testobj.Object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com")
	gadgetsCRD := testobj.Object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets.example.com")
	goneCRD := testobj.Object("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gone.example.com")
	a := configMap("team-a", "a")
	for _, tc := range []struct {
		name     string
		uses     bool // team-b/cache renders a Widget
		withheld []string
		kept     []string
		provider string // of Widget, once the prunes are decided
	}{
		{name: "in use: kept and still provided", uses: true, withheld: ids(widgetsCRD), kept: ids(gadgetsCRD, goneCRD), provider: "team-a/web"},
		{name: "unused: left to the guards", kept: ids(gadgetsCRD, goneCRD, widgetsCRD)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(sch).WithObjects(liveCRD("widgets", "Widget"), liveCRD("gadgets", "Gadget")).Build()
			cache := []*unstructured.Unstructured{configMap("team-b", "c")}
			if tc.uses {
				cache = append(cache, testobj.Object("example.com/v1", "Widget", "team-b", "w"))
			}
			s := prunePhaseFixture(t, c,
				map[string][]*unstructured.Unstructured{"team-a/web": {a, widgetsCRD, gadgetsCRD, goneCRD}, "team-b/cache": cache},
				map[string][]*unstructured.Unstructured{"team-a/web": {a}, "team-b/cache": cache})
			s.guard = prune.NewGuard(s.set.Platform, "")
			s.readOnly = true
			s.inferContracts(nil)
			s.checkPrunes(context.Background())
			s.provideWithdrawn()

			r := s.byKey["team-a/web"]
			g.Expect(r.failure).To(BeNil())
			g.Expect(inventoryIDs(r.withheld)).To(Equal(tc.withheld))
			g.Expect(r.prune.Kept).To(Equal(tc.kept), "a CRD gone from the cluster is not kept for its users")
			g.Expect(r.prune.Stale).To(BeEmpty())
			if tc.provider == "" {
				g.Expect(r.view().readyReason()).To(Equal(cairnv1.ReasonSucceeded))
				g.Expect(r.warnings).To(BeEmpty())
				g.Expect(s.contracts.ProviderOf(widgetGK)).To(BeEmpty())
				return
			}
			g.Expect(r.view().readyReason()).To(Equal(cairnv1.ReasonContractWithdrawn))
			g.Expect(r.warnings).To(ConsistOf("ContractWithdrawn: kept CustomResourceDefinition widgets.example.com, which the render dropped: " +
				"Widget.example.com is still used by team-b/cache"))
			g.Expect(s.contracts.ProviderOf(widgetGK)).To(Equal(tc.provider))
			g.Expect(s.contracts.Providers("team-b/cache")).To(Equal([]string{tc.provider}))
			g.Expect(s.contracts.ProvidedNames("team-a/web")).To(Equal([]string{widgetKind}))
		})
	}
}

// guardOf is the prune guard of a Platform without tenants with policy p.
func guardOf(p cairnv1.PrunePolicy) prune.Guard {
	return prune.NewGuard(&cairnv1.Platform{Spec: cairnv1.PlatformSpec{Prune: p}}, "")
}

func inv(ids ...string) apply.Inventory {
	out := apply.Inventory{}
	for _, id := range ids {
		out[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	return out
}

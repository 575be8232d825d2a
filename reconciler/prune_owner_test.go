package reconciler

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render/declarations"
)

// staleSet is the prune set of instance key, owned by owner, deleting n objects of before.
func staleSet(key, owner string, n int, covered, removed bool) *pruneSet {
	ps := &pruneSet{key: key, owner: owner, stale: apply.Inventory{}, before: 10, covered: covered, removed: removed}
	for i := range n {
		id := fmt.Sprintf("ns_%s-%d__ConfigMap", key, i)
		ps.stale[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	return ps
}

func tenantsPlatform(prune cairnv1.PrunePolicy) *cairnv1.Platform {
	return &cairnv1.Platform{Spec: cairnv1.PlatformSpec{Prune: prune, Tenants: []cairnv1.Tenant{
		{Name: "team-a", Paths: []string{"tenants/a/**"}}, {Name: "team-b", Paths: []string{"tenants/b/**"}},
	}}}
}

// TestPruneGuardPerTenant: the sync-wide limits count each owner's instances apart,
// and the trailer speaks only for the instances it covers.
func TestPruneGuardPerTenant(t *testing.T) {
	platform := tenantsPlatform(cairnv1.PrunePolicy{MaxDeletions: ptr(3)})
	cases := []struct {
		name      string
		msg       string
		sets      []*pruneSet
		instances map[string]int
		refused   map[string]string // key -> part of its refusal; absent: allowed
	}{
		{name: "one tenant over the cap refuses its instances alone",
			sets:      []*pruneSet{staleSet("a1", "team-a", 4, false, false), staleSet("b1", "team-b", 1, false, false)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"a1": "tenant team-a's instances would delete 4 objects in this sync, over its cap of 3"}},
		{name: "each owner within its cap, the sync over it",
			sets:      []*pruneSet{staleSet("p1", "", 3, false, false), staleSet("a1", "team-a", 3, false, false), staleSet("b1", "team-b", 3, false, false)},
			instances: map[string]int{"": 1, "team-a": 1, "team-b": 1}},
		{name: "the platform's own instances count apart",
			sets:      []*pruneSet{staleSet("p1", "", 4, false, false), staleSet("a1", "team-a", 1, false, false)},
			instances: map[string]int{"": 1, "team-a": 1},
			refused:   map[string]string{"p1": "the platform's own instances would delete 4 objects"}},
		{name: "an instance of a refused tenant that deletes nothing is not refused",
			sets:      []*pruneSet{staleSet("a1", "team-a", 4, false, false), staleSet("a2", "team-a", 0, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a1": "would delete 4 objects"}},
		{name: "half of one tenant's instances removed",
			sets: []*pruneSet{staleSet("a1", "team-a", 1, false, true), staleSet("a2", "team-a", 0, false, true),
				staleSet("b1", "team-b", 1, false, true)},
			instances: map[string]int{"team-a": 3, "team-b": 2, "": 5},
			refused: map[string]string{"a1": "this commit removes 2 of tenant team-a's 3 instances, more than half",
				"a2": "removes 2 of tenant team-a's 3 instances"}},
		{name: "the platform's only instance removed",
			sets:      []*pruneSet{staleSet("p1", "", 1, false, true)},
			instances: map[string]int{"": 1, "team-a": 4},
			refused:   map[string]string{"p1": "removes 1 of the platform's own 1 instances"}},
		{name: "a trailer lifts the guard of the instances its commit changes only", msg: "b\n\ncairn-allow-prune: 10",
			sets:      []*pruneSet{staleSet("a1", "team-a", 4, false, false), staleSet("b1", "team-b", 4, true, false)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"a1": "tenant team-a's instances would delete 4 objects"}},
		{name: "a tenant's instances the trailer does not cover are checked without those it does", msg: "a\n\ncairn-allow-prune: 10",
			sets:      []*pruneSet{staleSet("a1", "team-a", 4, true, false), staleSet("a2", "team-a", 4, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a2": "would delete 4 objects"}},
		{name: "a trailer too small lifts nothing", msg: "a\n\ncairn-allow-prune: 1",
			sets:      []*pruneSet{staleSet("a1", "team-a", 2, true, false), staleSet("a2", "team-a", 2, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a1": "would delete 4 objects", "a2": "would delete 4 objects"}},
		{name: "a trailer lifts a removal its commit makes", msg: "a\n\ncairn-allow-prune: 10",
			sets:      []*pruneSet{staleSet("a1", "team-a", 5, true, true), staleSet("b1", "team-b", 1, false, true)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"b1": "removes 1 of tenant team-b's 1 instances"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := newPruneGuard(platform, tc.msg).checkSync(tc.sets, tc.instances)
			owners := map[string]bool{}
			for _, s := range tc.sets {
				want, refused := tc.refused[s.key]
				if !refused {
					g.Expect(s.refused).NotTo(HaveOccurred(), s.key)
					continue
				}
				owners[s.owner] = true
				g.Expect(s.refused).To(MatchError(ContainSubstring(want)), s.key)
				g.Expect(s.refused).To(MatchError(ContainSubstring("to a commit that changes the instance's file")), s.key)
				g.Expect(s.refused.(*outcome.Failure).Reason).To(Equal(cairnv1.ReasonPruneGuard))
				g.Expect(errs).To(ContainElement(BeIdenticalTo(s.refused)), "counted once per owner")
			}
			g.Expect(errs).To(HaveLen(len(owners)), "one refusal per refused owner")
		})
	}
}

// TestMaxPercentTrailerCoversOnlyItsInstances: the trailer lifts maxPercent for an
// instance whose file the commit changes, within its count.
func TestMaxPercentTrailerCoversOnlyItsInstances(t *testing.T) {
	guard := newPruneGuard(tenantsPlatform(cairnv1.PrunePolicy{MaxPercent: ptr(50)}), "x\n\ncairn-allow-prune: 6")
	for _, tc := range []struct {
		name    string
		set     *pruneSet
		refused bool
	}{
		{name: "covered", set: staleSet("a1", "team-a", 6, true, false)},
		{name: "not covered", set: staleSet("a1", "team-a", 6, false, false), refused: true},
		{name: "covered, over the trailer's count", set: staleSet("a1", "team-a", 7, true, false), refused: true},
		{name: "within maxPercent", set: staleSet("a1", "team-a", 5, false, false)},
	} {
		err := guard.checkInstance(tc.set)
		if !tc.refused {
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), tc.name)
			continue
		}
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("over prune.maxPercent 50%")), tc.name)
	}
}

// TestTrailerCoversTheInstancesItsCommitChanges: with tenants, the trailer speaks for
// an instance whose declaration file the commit changes, for a removed instance when
// the commit changes a file of its owner, for none when the diff is unknown; without
// tenants, for every instance.
func TestTrailerCoversTheInstancesItsCommitChanges(t *testing.T) {
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	removed := func(ns, name, file string) *cairnv1.ModuleInstance {
		return &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{sourceAnnotation: file}}}
	}
	instances := map[string]*cairnv1.ModuleInstance{
		"tool": set.Instance("ops", "tool"), "web": set.Instance("team-a", "web"),
		"gone-a": removed("team-a", "gone", "tenants/team-a/gone.yaml"), "gone-p": removed("ops", "gone", "instances/gone.yaml"),
	}
	for _, tc := range []struct {
		name    string
		changed []string
		covered []string
	}{
		{name: "unknown diff"},
		{name: "a tenant's file", changed: []string{"tenants/team-a/web.yaml"}, covered: []string{"web", "gone-a"}},
		{name: "the removed instance's file", changed: []string{"tenants/team-a/gone.yaml"}, covered: []string{"gone-a"}},
		{name: "a platform file", changed: []string{"README.md"}, covered: []string{"gone-p"}},
		{name: "the platform's instance's file", changed: []string{"instances/tool.yaml", "modules/app/main.cue"}, covered: []string{"tool", "gone-p"}},
		{name: "nothing", changed: []string{}},
	} {
		rev := Revision{Changed: tc.changed}
		s := &syncRun{set: set, rev: rev, changes: newChanges(rev, "."), guard: newPruneGuard(set.Platform, "")}
		var covered []string
		for name, mi := range instances {
			if s.trailerCovers(mi, name == "gone-a" || name == "gone-p") {
				covered = append(covered, name)
			}
		}
		NewWithT(t).Expect(covered).To(ConsistOf(tc.covered), tc.name)
		s.guard.tenants = false
		for name, mi := range instances {
			NewWithT(t).Expect(s.trailerCovers(mi, name == "gone-a" || name == "gone-p")).To(BeTrue(), "without tenants: %s, %s", tc.name, name)
		}
	}
}

func TestOwnersOfLiveInstances(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &syncRun{set: set, live: map[string]*cairnv1.ModuleInstance{}}
	for _, mi := range []*cairnv1.ModuleInstance{
		set.Instance("ops", "tool"), set.Instance("team-a", "web"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gone", Annotations: map[string]string{sourceAnnotation: "tenants/team-a/gone.yaml"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "old"}}, // records no source: the platform's
	} {
		s.live[mi.Namespace+"/"+mi.Name] = mi
	}
	g.Expect(s.ownerOf(set.Instance("team-a", "web"))).To(Equal("team-a"))
	g.Expect(s.liveByOwner()).To(Equal(map[string]int{"": 2, "team-a": 2}))
}

package prune

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

// staleSet is the prune set of instance key, owned by owner, deleting n objects of before.
func staleSet(key, owner string, n int, covered, removed bool) *Set {
	ps := &Set{Key: key, Owner: owner, Stale: apply.Inventory{}, Before: 10, Covered: covered, Removed: removed}
	for i := range n {
		id := fmt.Sprintf("ns_%s-%d__ConfigMap", key, i)
		ps.Stale[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	return ps
}

func tenantsPlatform(policy cairnv1.PrunePolicy) *cairnv1.Platform {
	return &cairnv1.Platform{Spec: cairnv1.PlatformSpec{Prune: policy, Tenants: []cairnv1.Tenant{
		{Name: "team-a", Paths: []string{"tenants/a/**"}}, {Name: "team-b", Paths: []string{"tenants/b/**"}},
	}}}
}

// TestPruneGuardPerTenant: the sync-wide limits count each owner's instances apart,
// and the trailer speaks only for the instances it covers.
func TestPruneGuardPerTenant(t *testing.T) {
	platform := tenantsPlatform(cairnv1.PrunePolicy{MaxDeletions: ptr.To[int32](3)})
	cases := []struct {
		name      string
		msg       string
		sets      []*Set
		instances map[string]int
		refused   map[string]string // key -> part of its refusal; absent: allowed
	}{
		{name: "one tenant over the cap refuses its instances alone",
			sets:      []*Set{staleSet("a1", "team-a", 4, false, false), staleSet("b1", "team-b", 1, false, false)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"a1": "tenant team-a's instances would delete 4 objects in this sync, over its cap of 3"}},
		{name: "each owner within its cap, the sync over it",
			sets:      []*Set{staleSet("p1", "", 3, false, false), staleSet("a1", "team-a", 3, false, false), staleSet("b1", "team-b", 3, false, false)},
			instances: map[string]int{"": 1, "team-a": 1, "team-b": 1}},
		{name: "the platform's own instances count apart",
			sets:      []*Set{staleSet("p1", "", 4, false, false), staleSet("a1", "team-a", 1, false, false)},
			instances: map[string]int{"": 1, "team-a": 1},
			refused:   map[string]string{"p1": "the platform's own instances would delete 4 objects"}},
		{name: "an instance of a refused tenant that deletes nothing is not refused",
			sets:      []*Set{staleSet("a1", "team-a", 4, false, false), staleSet("a2", "team-a", 0, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a1": "would delete 4 objects"}},
		{name: "half of one tenant's instances removed",
			sets: []*Set{staleSet("a1", "team-a", 1, false, true), staleSet("a2", "team-a", 0, false, true),
				staleSet("b1", "team-b", 1, false, true)},
			instances: map[string]int{"team-a": 3, "team-b": 2, "": 5},
			refused: map[string]string{"a1": "this commit removes 2 of tenant team-a's 3 instances, more than half",
				"a2": "removes 2 of tenant team-a's 3 instances"}},
		{name: "the platform's only instance removed",
			sets:      []*Set{staleSet("p1", "", 1, false, true)},
			instances: map[string]int{"": 1, "team-a": 4},
			refused:   map[string]string{"p1": "removes 1 of the platform's own 1 instances"}},
		{name: "a trailer lifts the guard of the instances its commit changes only", msg: "b\n\ncairn-allow-prune: 10",
			sets:      []*Set{staleSet("a1", "team-a", 4, false, false), staleSet("b1", "team-b", 4, true, false)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"a1": "tenant team-a's instances would delete 4 objects"}},
		{name: "a tenant's instances the trailer does not cover are checked without those it does", msg: "a\n\ncairn-allow-prune: 10",
			sets:      []*Set{staleSet("a1", "team-a", 4, true, false), staleSet("a2", "team-a", 4, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a2": "would delete 4 objects"}},
		{name: "a trailer too small lifts nothing", msg: "a\n\ncairn-allow-prune: 1",
			sets:      []*Set{staleSet("a1", "team-a", 2, true, false), staleSet("a2", "team-a", 2, false, false)},
			instances: map[string]int{"team-a": 2},
			refused:   map[string]string{"a1": "would delete 4 objects", "a2": "would delete 4 objects"}},
		{name: "a trailer lifts a removal its commit makes", msg: "a\n\ncairn-allow-prune: 10",
			sets:      []*Set{staleSet("a1", "team-a", 5, true, true), staleSet("b1", "team-b", 1, false, true)},
			instances: map[string]int{"team-a": 1, "team-b": 1},
			refused:   map[string]string{"b1": "removes 1 of tenant team-b's 1 instances"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := NewGuard(platform, tc.msg).CheckSync(tc.sets, tc.instances)
			owners := map[string]bool{}
			for _, s := range tc.sets {
				want, refused := tc.refused[s.Key]
				if !refused {
					g.Expect(s.Refused).NotTo(HaveOccurred(), s.Key)
					continue
				}
				owners[s.Owner] = true
				g.Expect(s.Refused).To(MatchError(ContainSubstring(want)), s.Key)
				g.Expect(s.Refused).To(MatchError(ContainSubstring("to a commit that changes the instance's file")), s.Key)
				g.Expect(s.Refused.(*outcome.Failure).Reason).To(Equal(cairnv1.ReasonPruneGuard))
				g.Expect(errs).To(ContainElement(BeIdenticalTo(s.Refused)), "counted once per owner")
			}
			g.Expect(errs).To(HaveLen(len(owners)), "one refusal per refused owner")
		})
	}
}

// TestMaxPercentTrailerCoversOnlyItsInstances: the trailer lifts maxPercent for an
// instance whose file the commit changes, within its count.
func TestMaxPercentTrailerCoversOnlyItsInstances(t *testing.T) {
	guard := NewGuard(tenantsPlatform(cairnv1.PrunePolicy{MaxPercent: ptr.To[int32](50)}), "x\n\ncairn-allow-prune: 6")
	for _, tc := range []struct {
		name    string
		set     *Set
		refused bool
	}{
		{name: "covered", set: staleSet("a1", "team-a", 6, true, false)},
		{name: "not covered", set: staleSet("a1", "team-a", 6, false, false), refused: true},
		{name: "covered, over the trailer's count", set: staleSet("a1", "team-a", 7, true, false), refused: true},
		{name: "within maxPercent", set: staleSet("a1", "team-a", 5, false, false)},
	} {
		err := guard.CheckInstance(tc.set)
		if !tc.refused {
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), tc.name)
			continue
		}
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("over prune.maxPercent 50%")), tc.name)
	}
}

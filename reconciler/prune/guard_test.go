package prune

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

func TestAllowTrailer(t *testing.T) {
	for msg, want := range map[string]int{
		"fix":                                   -1,
		"fix\n\ncairn-allow-prune: 12":          12,
		"fix\n\nCairn-Allow-Prune:3\nSigned: x": 3,
		"fix\n\ncairn-allow-prune: many":        -1,
		"fix\n\ncairn-allow-prune: -2":          -1,
	} {
		NewWithT(t).Expect(AllowTrailer(msg)).To(Equal(want), msg)
	}
}

func inv(ids ...string) apply.Inventory {
	out := apply.Inventory{}
	for _, id := range ids {
		out[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	return out
}

func ptr(i int32) *int32 { return &i }

func TestPruneGuard(t *testing.T) {
	platform := &cairnv1.Platform{Spec: cairnv1.PlatformSpec{Prune: cairnv1.PrunePolicy{MaxDeletions: ptr(2), MaxPercent: ptr(50)}}}
	cases := []struct {
		name      string
		msg       string
		sets      []*Set
		instances int
		wantSync  string
		wantInst  string
		syncLimit string // the guard that refuses, as cairn_prune_refusals_total counts it
	}{
		{name: "within limits", sets: []*Set{{Key: "a", Stale: inv("ns_x__ConfigMap"), Before: 4}}, instances: 3},
		{name: "over maxDeletions", sets: []*Set{{Key: "a", Stale: inv("ns_x__ConfigMap", "ns_y__ConfigMap", "ns_z__ConfigMap"), Before: 10}},
			instances: 3, wantSync: "would delete 3 objects, over prune.maxDeletions 2", syncLimit: LimitMaxDeletions},
		{name: "over maxPercent", sets: []*Set{{Key: "a", Stale: inv("ns_x__ConfigMap", "ns_y__ConfigMap"), Before: 3}},
			instances: 3, wantInst: "would lose 2 of its 3 objects (66%), over prune.maxPercent 50%"},
		{name: "trailer allows", msg: "x\n\ncairn-allow-prune: 3", instances: 3,
			sets: []*Set{{Key: "a", Stale: inv("ns_x__ConfigMap", "ns_y__ConfigMap", "ns_z__ConfigMap"), Before: 3}}},
		{name: "trailer too small", msg: "x\n\ncairn-allow-prune: 1", instances: 3, wantSync: "over prune.maxDeletions 2", wantInst: "over prune.maxPercent 50%", syncLimit: LimitMaxDeletions,
			sets: []*Set{{Key: "a", Stale: inv("ns_x__ConfigMap", "ns_y__ConfigMap", "ns_z__ConfigMap"), Before: 3}}},
		{name: "half of instances removed", instances: 3, wantSync: "removes 2 of 3 instances", syncLimit: LimitHalfOfInstances,
			sets: []*Set{{Key: "a", Removed: true}, {Key: "b", Removed: true}}},
		{name: "removed instance ignores maxPercent", instances: 4,
			sets: []*Set{{Key: "a", Removed: true, Stale: inv("ns_x__ConfigMap"), Before: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			guard := NewGuard(platform, tc.msg)
			for _, s := range tc.sets {
				s.Covered = true // no tenants: the trailer speaks for every instance
			}
			errs := guard.CheckSync(tc.sets, map[string]int{"": tc.instances})
			err := tc.sets[0].Refused
			if tc.wantSync == "" {
				g.Expect(errs).To(BeEmpty())
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(errs).To(HaveLen(1))
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantSync)))
				g.Expect(err).To(BeIdenticalTo(errs[0]))
				g.Expect(err.(*outcome.Failure).Reason).To(Equal(cairnv1.ReasonPruneGuard))
			}
			g.Expect(RefusedBy(err)).To(Equal(tc.syncLimit))
			err = guard.CheckInstance(tc.sets[0])
			if tc.wantInst == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantInst)))
				g.Expect(RefusedBy(err)).To(Equal(LimitMaxPercent))
			}
		})
	}
}

func TestPruneGuardKeepsProtectedKinds(t *testing.T) {
	g := NewWithT(t)
	guard := NewGuard(nil, "")
	stale := inv("_team-x__Namespace", "ns_cm__ConfigMap", "ns_data__PersistentVolumeClaim")
	ps := guard.Split("ns.a", stale, false)
	g.Expect(ps.Stale).To(HaveLen(1))
	g.Expect(ps.Stale).To(HaveKey("ns_cm__ConfigMap"))
	g.Expect(ps.Kept).To(ConsistOf("_team-x__Namespace", "ns_data__PersistentVolumeClaim"))
	g.Expect(guard.Split("ns.a", stale, true).Stale).To(HaveLen(3), "the instance opted in")
}

package prune

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
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

package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler/apply"
)

// TestFailedInventoryIsTheLastOneWhenNothingStayedWritten: a failed apply that left
// nothing written records the last inventory, not the new objects it never wrote.
func TestFailedInventoryIsTheLastOneWhenNothingStayedWritten(t *testing.T) {
	g := NewWithT(t)
	old := apply.Inventory{"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h1"}}
	r := &instanceRun{oldInv: old, newInv: apply.Inventory{
		"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h2"},
		"_fresh__Namespace":    {ID: "_fresh__Namespace", Version: "v1", Hash: "h3"},
	}, applied: apply.Report{Applied: map[string]bool{}}}

	g.Expect(r.failedInventory()).To(HaveKey("_fresh__Namespace"), "an apply that may have written records the new objects")
	r.applied.Untouched = true
	g.Expect(r.failedInventory()).To(Equal(old))
}

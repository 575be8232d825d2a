package reconciler

import (
	"encoding/json"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
)

const skewWarning = "module example.com/app@v0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"

// TestRenderWarningsReachReadyResultAndPlan: a render's warnings (catalog skew under
// skewPolicy: Warn) end the Ready message, are in the sync result, and in the plan's
// JSON and Markdown.
func TestRenderWarningsReachReadyResultAndPlan(t *testing.T) {
	g := NewWithT(t)
	mi := &cairnv1.ModuleInstance{}
	mi.Namespace, mi.Name = "team-a", "web"
	e := &instanceState{instancePlan: instancePlan{mi: mi, affected: true, was: mi}, placedRender: placedRender{rendered: &render.Result{Warnings: []string{skewWarning}}}}
	e.warnings = e.rendered.Warnings
	r := e.reconcileOn(mi)

	status.Succeeded(mi, "abc", cairnv1.ReasonSucceeded, r.view().readyMessage())
	g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())
	g.Expect(conditions.GetMessage(mi, "Ready")).To(HaveSuffix("; warnings: " + skewWarning))
	g.Expect(r.result().Warnings).To(ConsistOf(skewWarning))
	g.Expect(r.view().outcome()).To(ContainSubstring(skewWarning))

	plan := &Plan{Revision: "abc", Instances: []InstancePlan{{Namespace: "team-a", Name: "web", Action: "Update",
		Warnings: r.warnings}}}
	b, err := json.Marshal(plan)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`"warnings":["module example.com/app@v0 requires catalog`))
	md := plan.Markdown()
	g.Expect(md).To(ContainSubstring("| `team-a/web` | Update ⚠️ 1 warning(s) |"))
	g.Expect(md).To(ContainSubstring("- ⚠️ **Warning:** " + skewWarning))
	g.Expect(plan.Failed()).To(BeFalse(), "a warning is not a failure")
}

func TestReadyMessageWithoutWarningsHasNoNote(t *testing.T) {
	g := NewWithT(t)
	r := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{}}}
	g.Expect(r.view().readyMessage()).NotTo(ContainSubstring("warnings"))
	g.Expect(r.result().Warnings).To(BeEmpty())
}

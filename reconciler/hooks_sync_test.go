package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// chartHook is a hook of team-a, of events, with weight.
func chartHook(apiVersion, kind, name string, weight int, events ...string) render.Hook {
	return render.Hook{Object: testobj.Object(apiVersion, kind, "team-a", name), Events: events, Weight: weight}
}

// TestPlanMarkdownListsHooks: hooks are listed apart from the objects, in order.
func TestPlanMarkdownListsHooks(t *testing.T) {
	g := NewWithT(t)
	hks := []render.Hook{
		chartHook("v1", "Secret", "web-setup", -5, render.HookPreInstall),
		chartHook("batch/v1", "Job", "web-setup", 5, render.HookPreInstall, render.HookPreUpgrade),
		chartHook("v1", "ConfigMap", "web-done", 0, render.HookPostInstall),
	}
	plan := &Plan{Revision: "0123456789abcdef", Instances: []InstancePlan{{Namespace: "team-a", Name: "web", Action: outcome.PlanCreate,
		Create: []string{"Deployment/team-a/web"}, Hooks: hooks.Plans(hks, render.HookPreInstall, render.HookPostInstall)}}}
	md := plan.Markdown()
	g.Expect(md).To(ContainSubstring("**Helm hooks** (3, run in this order; not in the inventory):\n\n```\n" +
		"pre-install (weight -5) Secret/team-a/web-setup\npre-install (weight 5) Job/team-a/web-setup\n" +
		"post-install (weight 0) ConfigMap/team-a/web-done\n```"))
	g.Expect(md).To(ContainSubstring("+ Deployment/team-a/web\n"))
	g.Expect(md).NotTo(ContainSubstring("+ Secret/team-a/web-setup"))
}

// TestHookEventsOfARun: a run without a render runs no hooks; one with a render
// runs those of hooks.Events.
func TestHookEventsOfARun(t *testing.T) {
	g := NewWithT(t)
	pre, post := (&instanceState{}).reconcileOn(nil).hookEvents()
	g.Expect([]string{pre, post}).To(Equal([]string{"", ""}))
	r := &instanceState{placedRender: placedRender{rendered: &render.Result{Digest: "hmac-sha256:1", Hooks: []render.Hook{
		chartHook("v1", "Secret", "s", 0, render.HookPreInstall)}}}}
	pre, post = r.reconcileOn(nil).hookEvents()
	g.Expect([]string{pre, post}).To(Equal([]string{render.HookPreInstall, render.HookPostInstall}))
}

// TestHasHookRecord: an instance may have a hook record when its status names one
// or it is a chart (an attempt may have written it without its status).
func TestHasHookRecord(t *testing.T) {
	g := NewWithT(t)
	named := &cairnv1.ModuleInstance{Status: cairnv1.ModuleInstanceStatus{HookRecord: "cairn-hooks-a.b"}}
	chart := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: cairnv1.ModuleSource{Chart: &cairnv1.ChartSource{}}}}
	local := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: cairnv1.ModuleSource{Local: &cairnv1.LocalModule{}}}}
	g.Expect(hasHookRecord(named)).To(BeTrue())
	g.Expect(hasHookRecord(chart)).To(BeTrue())
	g.Expect(hasHookRecord(local)).To(BeFalse())
}

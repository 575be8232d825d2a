package reconciler

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

func hookObject(apiVersion, kind, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "team-a"}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestHookDone: a Job is done when Complete, failed with its condition's reason
// and message when Failed; a Pod by its phase; anything else is still running.
func TestHookDone(t *testing.T) {
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}}}
	}
	for _, tc := range []struct {
		name string
		live *unstructured.Unstructured
		want string // "" done, "running", else a substring of the error
	}{
		{"job complete", hookObject("batch/v1", "Job", "j", cond("Complete", "True", "", "")), ""},
		{"job failed", hookObject("batch/v1", "Job", "j", cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")),
			"Job failed: DeadlineExceeded: Job was active longer than specified deadline"},
		{"job failed false", hookObject("batch/v1", "Job", "j", cond("Failed", "False", "", "")), "running"},
		{"job new", hookObject("batch/v1", "Job", "j", nil), "running"},
		{"pod succeeded", hookObject("v1", "Pod", "p", map[string]any{"phase": "Succeeded"}), ""},
		{"pod running", hookObject("v1", "Pod", "p", map[string]any{"phase": "Running"}), "running"},
		{"pod failed", hookObject("v1", "Pod", "p", map[string]any{"phase": "Failed", "containerStatuses": []any{
			map[string]any{"name": "c", "state": map[string]any{"terminated": map[string]any{"exitCode": int64(3), "reason": "Error"}}}}}),
			"container c exited with 3 (Error)"},
		{"pod evicted", hookObject("v1", "Pod", "p", map[string]any{"phase": "Failed", "reason": "Evicted", "message": "low on memory"}),
			"Evicted: low on memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := hookDone(tc.live)
			switch tc.want {
			case "":
				g.Expect(err).NotTo(HaveOccurred())
			case "running":
				g.Expect(errors.Is(err, errHookRunning)).To(BeTrue(), "%v", err)
			default:
				g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}

// TestHookEvents: install on a first sync, upgrade when the render changed, none
// when it did not or when the chart has no hooks.
func TestHookEvents(t *testing.T) {
	hooks := []render.Hook{{Object: hookObject("v1", "Secret", "s", nil), Events: []string{render.HookPreInstall}}}
	applied := &cairnv1.ModuleInstance{}
	applied.Status.LastAppliedRevision, applied.Status.RenderDigest = "abc", "hmac-sha256:1"
	for _, tc := range []struct {
		name      string
		live      *cairnv1.ModuleInstance
		oldInv    apply.Inventory
		digest    string
		hooks     []render.Hook
		pre, post string
	}{
		{"new", nil, nil, "hmac-sha256:1", hooks, render.HookPreInstall, render.HookPostInstall},
		{"never applied", &cairnv1.ModuleInstance{}, nil, "hmac-sha256:1", hooks, render.HookPreInstall, render.HookPostInstall},
		{"inventory left", &cairnv1.ModuleInstance{}, apply.Inventory{"a_b__ConfigMap": {ID: "a_b__ConfigMap", Hash: "h"}}, "hmac-sha256:1", hooks,
			render.HookPreUpgrade, render.HookPostUpgrade},
		{"first sync failed", &cairnv1.ModuleInstance{}, apply.Inventory{"a_b__ConfigMap": {ID: "a_b__ConfigMap"}}, "hmac-sha256:1", hooks,
			render.HookPreInstall, render.HookPostInstall},
		{"changed", applied, nil, "hmac-sha256:2", hooks, render.HookPreUpgrade, render.HookPostUpgrade},
		{"unchanged", applied, nil, "hmac-sha256:1", hooks, "", ""},
		{"no hooks", nil, nil, "hmac-sha256:1", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &instanceRun{live: tc.live, oldInv: tc.oldInv, rendered: &render.Result{Digest: tc.digest, Hooks: tc.hooks}}
			pre, post := hookEvents(r)
			g.Expect([]string{pre, post}).To(Equal([]string{tc.pre, tc.post}))
		})
	}
}

// TestNextHookRecord: the record keeps the delete hooks of the render and adds the
// install and upgrade hooks to those left before.
func TestNextHookRecord(t *testing.T) {
	g := NewWithT(t)
	pre := render.Hook{Object: hookObject("batch/v1", "Job", "setup", nil), Events: []string{render.HookPreInstall, render.HookPreUpgrade}}
	del := render.Hook{Object: hookObject("v1", "ConfigMap", "bye", nil), Events: []string{render.HookPreDelete}}
	prev := hookRecord{Left: []cairnv1.InventoryEntry{{ID: "team-a_old_batch_Job", Version: "batch/v1"}}}
	rec := nextHookRecord(prev, []render.Hook{pre, del})
	g.Expect(rec.Delete).To(Equal([]render.Hook{del}))
	g.Expect(rec.Left).To(Equal([]cairnv1.InventoryEntry{
		{ID: "team-a_old_batch_Job", Version: "batch/v1"}, {ID: "team-a_setup_batch_Job", Version: "batch/v1"}}))
	g.Expect(nextHookRecord(hookRecord{}, nil)).To(Equal(hookRecord{}))
}

// TestPlanMarkdownListsHooks: hooks are listed apart from the objects, in order.
func TestPlanMarkdownListsHooks(t *testing.T) {
	g := NewWithT(t)
	hooks := []render.Hook{
		{Object: hookObject("v1", "Secret", "web-setup", nil), Events: []string{render.HookPreInstall}, Weight: -5},
		{Object: hookObject("batch/v1", "Job", "web-setup", nil), Events: []string{render.HookPreInstall, render.HookPreUpgrade}, Weight: 5},
		{Object: hookObject("v1", "ConfigMap", "web-done", nil), Events: []string{render.HookPostInstall}},
	}
	plan := &Plan{Revision: "0123456789abcdef", Instances: []InstancePlan{{Namespace: "team-a", Name: "web", Action: outcome.PlanCreate,
		Create: []string{"Deployment/team-a/web"}, Hooks: planHooks(hooks, render.HookPreInstall, render.HookPostInstall)}}}
	md := plan.Markdown()
	g.Expect(md).To(ContainSubstring("**Helm hooks** (3, run in this order; not in the inventory):\n\n```\n" +
		"pre-install (weight -5) Secret/team-a/web-setup\npre-install (weight 5) Job/team-a/web-setup\n" +
		"post-install (weight 0) ConfigMap/team-a/web-done\n```"))
	g.Expect(md).To(ContainSubstring("+ Deployment/team-a/web\n"))
	g.Expect(md).NotTo(ContainSubstring("+ Secret/team-a/web-setup"))
}

// TestAfterEarlierRun: pre hooks that ran for this render are not run again, and
// the post hooks are those of the event that ran; another render runs both.
func TestAfterEarlierRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ran       *hookRun
		pre, post string
	}{
		{"none ran", nil, render.HookPreUpgrade, render.HookPostUpgrade},
		{"install ran for this render", &hookRun{Event: render.HookPreInstall, Digest: "d1"}, "", render.HookPostInstall},
		{"upgrade ran for this render", &hookRun{Event: render.HookPreUpgrade, Digest: "d1"}, "", render.HookPostUpgrade},
		{"ran for another render", &hookRun{Event: render.HookPreInstall, Digest: "d0"}, render.HookPreUpgrade, render.HookPostUpgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pre, post := afterEarlierRun(tc.ran, "d1", render.HookPreUpgrade, render.HookPostUpgrade)
			g.Expect([]string{pre, post}).To(Equal([]string{tc.pre, tc.post}))
		})
	}
}

package reconciler

import (
	"context"
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render"
)

// HookPlan is one Helm hook a sync would run, listed apart from the objects it
// creates, configures and prunes: hooks are not in the inventory.
type HookPlan struct {
	// Event is the hook event it runs in (pre-install, post-upgrade, pre-delete...).
	Event string `json:"event"`
	// Weight is its helm.sh/hook-weight.
	Weight int `json:"weight"`
	// Object is the hook's Kind/namespace/name.
	Object string `json:"object"`
	// Source is the chart template it comes from.
	Source string `json:"source,omitempty"`
}

// String is one line of a plan: "pre-install (weight -5) Secret/team-a/web-setup".
func (h HookPlan) String() string {
	return fmt.Sprintf("%s (weight %d) %s", h.Event, h.Weight, h.Object)
}

// planHooks lists the hooks of events, in the order they would run.
func planHooks(hooks []render.Hook, events ...string) []HookPlan {
	var out []HookPlan
	for _, event := range events {
		for _, h := range render.HooksFor(hooks, event) {
			out = append(out, HookPlan{Event: event, Weight: h.Weight, Object: apply.Describe(h.Object), Source: h.Source})
		}
	}
	return out
}

// previewHooks lists the hooks a sync of r would run, as hookPhases decides: a
// retry whose pre hooks ran already for this render lists its post hooks only.
// When the hook record cannot be read it lists both, and says so.
func (s *syncRun) previewHooks(ctx context.Context, r *instanceRun, ip *InstancePlan) {
	pre, post := hookEvents(r)
	if pre == "" {
		return
	}
	if r.live != nil {
		p, q, f := s.hookPhases(ctx, r)
		if f != nil {
			ip.Warnings = append(ip.Warnings, "the hooks listed may have run already: "+f.Error())
		} else {
			pre, post = p, q
		}
	}
	ip.Hooks = planHooks(r.hooks(), pre, post)
}

// previewDeleteHooks lists the hooks removing live would run, from its hook record.
func (s *syncRun) previewDeleteHooks(ctx context.Context, live *cairnv1.ModuleInstance) ([]HookPlan, error) {
	rec, err := s.e.inventories().loadHooks(ctx, live)
	if err != nil {
		return nil, err
	}
	return planHooks(rec.Delete, render.HookPreDelete, render.HookPostDelete), nil
}

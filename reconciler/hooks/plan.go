package hooks

import (
	"fmt"

	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render"
)

// Plan is one Helm hook a sync would run, listed apart from the objects it
// creates, configures and prunes: hooks are not in the inventory.
type Plan struct {
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
func (h Plan) String() string {
	return fmt.Sprintf("%s (weight %d) %s", h.Event, h.Weight, h.Object)
}

// Plans lists the hooks of events among hooks, in the order they would run.
func Plans(hooks []render.Hook, events ...string) []Plan {
	var out []Plan
	for _, event := range events {
		for _, h := range render.HooksFor(hooks, event) {
			out = append(out, Plan{Event: event, Weight: h.Weight, Object: apply.Describe(h.Object), Source: h.Source})
		}
	}
	return out
}

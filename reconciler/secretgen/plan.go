package secretgen

import (
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Plan is what a sync would do to one generated Secret (spec.secrets) or copy; it
// never holds a value.
type Plan struct {
	// Secret is Secret/<namespace>/<name>.
	Secret string `json:"secret"`
	// Action is create, keep, rotate or update.
	Action string `json:"action"`
	Why    string `json:"why,omitempty"`
}

// Plans is what a sync would do to the Secrets of decls. affected: the revision
// changes the instance; exists: its CR exists. A sync of an instance the revision
// does not affect only rotates (the declarations with rotateAfter that are due, once
// the CR exists): its other Secrets are kept.
func Plans(decls []*Decl, affected, exists bool) []Plan {
	var out []Plan
	for _, d := range decls {
		synced := affected || (exists && HasRotation(d.spec) && d.regenerate)
		for _, t := range d.targets {
			p := Plan{Secret: t.Describe(), Action: string(t.action), Why: t.why}
			if !synced {
				p.Action, p.Why = string(Keep), "the revision does not change the instance and no rotation is due"
			}
			out = append(out, p)
		}
	}
	return out
}

// PlansChange reports whether a sync would write any of the Secrets of plans.
func PlansChange(plans []Plan) bool {
	for _, p := range plans {
		if p.Action != string(Keep) {
			return true
		}
	}
	return false
}

// Line describes what a sync would do to one generated Secret in one line.
func Line(p Plan) string {
	return p.Action + " " + p.Secret + " (" + p.Why + ")"
}

// Summary says, per declaration, what the sync did: "generated Secrets:
// db-credentials kept, webhook-tls rotated"; "" without declarations.
func Summary(decls []*Decl) string {
	if len(decls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(decls))
	for _, d := range decls {
		parts = append(parts, d.spec.Name+" "+d.outcome().PastTense())
	}
	return "generated Secrets: " + strings.Join(parts, ", ")
}

// outcome is the strongest action among the targets of d.
func (d *Decl) outcome() Action {
	rank := map[Action]int{Keep: 0, Update: 1, Create: 2, Rotate: 3}
	best := Keep
	for _, t := range d.targets {
		if rank[t.action] > rank[best] {
			best = t.action
		}
	}
	return best
}

// HasRotation reports whether a declaration sets a rotateAfter.
func HasRotation(spec cairnv1.GeneratedSecret) bool {
	return spec.RotateAfter != nil && spec.RotateAfter.Duration > 0
}

// InstanceRotates reports whether any declaration of mi sets a rotateAfter.
func InstanceRotates(mi *cairnv1.ModuleInstance) bool {
	for _, spec := range mi.Spec.Secrets {
		if HasRotation(spec) {
			return true
		}
	}
	return false
}

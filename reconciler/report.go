package reconciler

import (
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/report"
)

// The engine's glue to reconciler/report, which tells the outside what a sync did.

// touched lists the instances this sync acts on: the affected and the removed ones.
func (s *RevisionState) touched() []report.InstanceKey {
	var out []report.InstanceKey
	for _, r := range s.runs {
		if r.affected {
			out = append(out, keyOf(r.mi))
		}
	}
	for _, live := range append(slices.Clone(s.removed), s.held...) {
		out = append(out, keyOf(live))
	}
	for _, inv := range s.set.Invalid {
		if ns, name := splitKey(inv.Object); inv.Kind == "ModuleInstance" && name != "" {
			out = append(out, report.InstanceKey{Namespace: ns, Name: name})
		}
	}
	return out
}

// keyOf is the key mi is reported under.
func keyOf(mi *cairnv1.ModuleInstance) report.InstanceKey {
	return report.InstanceKey{Namespace: mi.Namespace, Name: mi.Name}
}

// transition is what a status write of an instance's outcome reports: the event of
// its Ready transition and its push-to-Ready time.
func (in *revisionInput) transition(before, after client.Object) {
	in.e.emitTransition(before, after)
	in.e.opts.Metrics.ObservePushToReady(in.rev.SHA, in.rev.Committed, before, after, time.Now())
}

// emitTransition records the event of a change of after's Ready condition from
// before's (see report.RecordTransition).
func (e *Engine) emitTransition(before, after client.Object) {
	report.RecordTransition(e.opts.Events, before, after)
}

// emitRemoval records that an instance that left Git was removed (see
// report.RecordRemoval).
func (e *Engine) emitRemoval(live *cairnv1.ModuleInstance, res InstanceResult, revision string) {
	report.RecordRemoval(e.opts.Events, live, res, revision)
}

// emitHold records the event of a hold or a release (see report.RecordHold).
func (e *Engine) emitHold(mi *cairnv1.ModuleInstance, reason, note string) {
	report.RecordHold(e.opts.Events, mi, reason, note)
}

// emitDrift records the event of a drift check (see report.RecordDrift).
func (e *Engine) emitDrift(before, after *cairnv1.ModuleInstance) {
	report.RecordDrift(e.opts.Events, before, after)
}

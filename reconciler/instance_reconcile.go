package reconciler

import (
	"slices"
	"time"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/secretgen"
)

// instanceReconcile is one reconcile of one instance at a revision, once its
// render has settled (syncInstance): the CR it works on, what its phases return as
// it goes, and its failure. It reads the instance's plan, placed render and the
// revision's verdicts on it, and writes none of them but the owner labels of its
// placed objects when its CR was replaced since placement (a new UID: see
// applyInstance), objects no other instance reads. syncInstance makes it, on a copy of
// the CR the revision step wrote, and it lives for that call: no other reconcile and
// no verdict over the revision reads it, and the revision keeps only its result
// (instanceState.final). A plan previews a reconcile the same way, on the CR it found
// (previewRendered).
type instanceReconcile struct {
	*instancePlan
	*placedRender
	*instanceVerdicts
	render *rendering

	// live is the CR: as the revision step wrote the instance's input into it,
	// then as this reconcile's writes leave it.
	live *cairnv1.ModuleInstance
	// failure is why the instance fails at this revision: its render's or a
	// verdict's when the reconcile starts, else the first of the reconcile's own.
	failure *outcome.Failure
	// warnings are the render's, then the apply's.
	warnings []string
	// wrote is the apply phase's (applyInstance); secrets are the generated Secrets
	// it read and wrote (secrets_phase.go).
	wrote   written
	secrets []*secretgen.Decl
	// created: this reconcile recorded the instance's first render applied.
	created bool
	// hookRecord is the instance's hook record as this reconcile last read or
	// wrote it (nil: not read yet), so that it reads it once.
	hookRecord *hooks.Record
	// started is when it began (zero: a preview); release gives back its apply slot
	// (see RevisionState.apply; idempotent, nil without one).
	started time.Time
	release func()
}

// reconcileOn starts a reconcile of r on live, its CR.
func (r *instanceState) reconcileOn(live *cairnv1.ModuleInstance) *instanceReconcile {
	return &instanceReconcile{instancePlan: &r.instancePlan, placedRender: &r.placedRender,
		instanceVerdicts: &r.instanceVerdicts, render: &r.render,
		live: live, failure: r.failure, warnings: slices.Clone(r.warnings)}
}

func (r *instanceReconcile) setFailure(f *outcome.Failure) {
	if r.failure == nil {
		r.failure = f
	}
}

// view is what r's result reads.
func (r *instanceReconcile) view() resultView {
	return resultView{instancePlan: r.instancePlan, live: r.live, failure: r.failure, warnings: r.warnings,
		objects: len(r.objects), withheld: r.withheld, prune: r.prune, wrote: &r.wrote, secrets: r.secrets,
		started: r.started, created: r.created}
}

func (r *instanceReconcile) result() InstanceResult { return r.view().result() }

// view is what the result of r reads when no reconcile of it ran at this revision
// (unaffected, suspended, failed before its apply, or not reconciled yet).
func (r *instanceState) view() resultView {
	return resultView{instancePlan: &r.instancePlan, live: r.was, failure: r.failure, warnings: r.warnings,
		objects: len(r.objects), withheld: r.withheld, prune: r.prune, wrote: &written{}, secretNote: r.secretNote}
}

func (r *instanceState) setFailure(f *outcome.Failure) {
	if r.failure == nil {
		r.failure = f
	}
}

// done ends x, r's reconcile at this revision: its result is kept (final), then
// r's render is released (releaseRender).
func (r *instanceState) done(x *instanceReconcile) {
	res := x.result()
	r.final = &res
	r.releaseRender()
}

package reconciler

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// The Helm hooks of a sync (package hooks has what they are and how they run): the
// methods here gather what the hooks package needs from the run state and record
// what it returns.

// hookEvents are the events whose hooks a sync of r runs (hooks.Events).
func (r *instanceReconcile) hookEvents() (pre, post string) {
	if r.rendered == nil {
		return "", ""
	}
	return hooks.Events(r.rendered.Hooks, r.rendered.Digest, r.live, r.oldInv)
}

// hookPhases are the events whose hooks this sync of r runs before its apply and
// after its objects are healthy (see hooks.Events), and, when its pre hooks ran
// already for this render (an earlier attempt that failed or handed its health
// check over), none before and that event's post hooks after.
func (in *revisionInput) hookPhases(ctx context.Context, r *instanceReconcile) (pre, post string, f *outcome.Failure) {
	pre, post = r.hookEvents()
	if pre == "" {
		return "", "", nil
	}
	rec, err := in.hookRecordOf(ctx, r)
	if err != nil {
		return "", "", outcome.NewTransient(cairnv1.ReasonHookFailed, err)
	}
	pre, post = hooks.AfterEarlierRun(rec.Ran, r.rendered.Digest, pre, post)
	return pre, post, nil
}

// runPreHooks runs r's pre hooks of event (added to ran) and records that they ran
// for its render, with the hooks a removal needs.
func (in *revisionInput) runPreHooks(ctx context.Context, c client.Client, r *instanceReconcile, event string, ran *[]string) *outcome.Failure {
	if f := in.runHooks(ctx, c, r, event, ran); f != nil || event == "" {
		return f
	}
	rec, err := in.hookRecordOf(ctx, r)
	if err == nil {
		rec = hooks.NextRecord(rec, r.hooks()) // a removal before the first success finds them too
		rec.Ran = &hooks.PreRun{Event: event, Digest: r.rendered.Digest}
		err = in.storeHookRecord(ctx, r, r.live, rec)
	}
	if err != nil {
		return outcome.NewTransient(cairnv1.ReasonHookFailed, err)
	}
	return nil
}

// runHooks runs r's hooks of event, if any, with the instance's client c, and adds
// the event to ran ("2 pre-install").
func (in *revisionInput) runHooks(ctx context.Context, c client.Client, r *instanceReconcile, event string, ran *[]string) *outcome.Failure {
	if event == "" || len(render.HooksFor(r.hooks(), event)) == 0 {
		return nil
	}
	in.step(r.key(), "hooks %s: %s", r.key(), event)
	n, f := hooks.Run(ctx, c, hooks.OwnerOf(r.live), event, r.hooks())
	if n > 0 {
		*ran = append(*ran, fmt.Sprintf("%d %s", n, event))
	}
	return f
}

// hooks are the Helm hooks of the render (none without one).
func (r *placedRender) hooks() []render.Hook {
	if r.rendered == nil {
		return nil
	}
	return r.rendered.Hooks
}

// runDeleteHooks runs the pre-delete or post-delete hooks of a removed instance
// (from its hook record) with the identity it deletes as, within its timeout.
func (in *revisionInput) runDeleteHooks(ctx context.Context, c client.Client, live *cairnv1.ModuleInstance, deleteHooks []render.Hook,
	event string) *outcome.Failure {
	if len(render.HooksFor(deleteHooks, event)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout(live))
	defer cancel()
	in.step(live.Namespace+"/"+live.Name, "hooks %s/%s: %s", live.Namespace, live.Name, event)
	_, f := hooks.Run(ctx, c, hooks.OwnerOf(live), event, deleteHooks)
	return f
}

// hasHookRecord tells whether mi may have a hook record: its status names one,
// or it is a chart (whose record may have been written by an attempt whose status
// was not).
func hasHookRecord(mi *cairnv1.ModuleInstance) bool {
	k := moduleKindOf(mi)
	return mi.Status.HookRecord != "" || (k != nil && k.hooks())
}

// recordHooks writes the hook record after a successful sync whose render has
// hooks, or of an instance that has one (status.hookRecord) and whose render has
// none now (its chart dropped them, or it is not a chart any more): its old delete
// hooks no longer run on its removal (the objects its install hooks left still go
// then). An instance with neither reads nothing.
func (in *revisionInput) recordHooks(ctx context.Context, r *instanceReconcile, mi *cairnv1.ModuleInstance) error {
	if r.rendered == nil || (len(r.rendered.Hooks) == 0 && mi.Status.HookRecord == "") {
		return nil
	}
	prev, err := in.hookRecordOf(ctx, r)
	if err != nil {
		return err
	}
	return in.storeHookRecord(ctx, r, mi, hooks.NextRecord(prev, r.rendered.Hooks))
}

// hookRecordOf is r's hook record, read once per sync.
func (in *revisionInput) hookRecordOf(ctx context.Context, r *instanceReconcile) (hooks.Record, error) {
	if r.hookRecord != nil {
		return *r.hookRecord, nil
	}
	rec, err := hooks.LoadRecord(ctx, in.e.cluster.client, in.e.namespace(), r.live)
	if err != nil {
		return rec, err
	}
	r.hookRecord = &rec
	return rec, nil
}

// storeHookRecord writes r's hook record (for mi, its CR) and remembers it.
// status.hookRecord names the record while there is one (mi's status is
// recorded after this, or, for the pre hooks, at the end of the attempt).
func (in *revisionInput) storeHookRecord(ctx context.Context, r *instanceReconcile, mi *cairnv1.ModuleInstance, rec hooks.Record) error {
	if err := hooks.StoreRecord(ctx, in.e.cluster.client, in.e.namespace(), mi, rec); err != nil {
		r.hookRecord = nil // read it again: the write may or may not have happened
		return err
	}
	r.hookRecord = &rec
	mi.Status.HookRecord = ""
	if !rec.Empty() {
		mi.Status.HookRecord = hooks.SecretName(mi)
	}
	return nil
}

// previewHooks lists the hooks a sync of r would run, as hookPhases decides: a
// retry whose pre hooks ran already for this render lists its post hooks only.
// When the hook record cannot be read it lists both, and says so.
func (in *revisionInput) previewHooks(ctx context.Context, r *instanceReconcile, ip *InstancePlan) {
	pre, post := r.hookEvents()
	if pre == "" {
		return
	}
	if r.live != nil {
		p, q, f := in.hookPhases(ctx, r)
		if f != nil {
			ip.Warnings = append(ip.Warnings, "the hooks listed may have run already: "+f.Error())
		} else {
			pre, post = p, q
		}
	}
	ip.Hooks = hooks.Plans(r.hooks(), pre, post)
}

// previewDeleteHooks lists the hooks removing live would run, from its hook record.
func (in *revisionInput) previewDeleteHooks(ctx context.Context, live *cairnv1.ModuleInstance) ([]HookPlan, error) {
	rec, err := hooks.LoadRecord(ctx, in.e.cluster.client, in.e.namespace(), live)
	if err != nil {
		return nil, err
	}
	return hooks.Plans(rec.Delete, render.HookPreDelete, render.HookPostDelete), nil
}

package reconciler

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// hookEvents are the events whose hooks a sync of r runs: install until it first
// synced (it never succeeded and applied none of its objects: a first sync that
// failed is retried as an install), upgrade when its render changed since its last
// good sync, none when it did not. A retry at the same render runs them again
// unless they ran (see hookPhases).
func hookEvents(r *instanceRun) (pre, post string) {
	switch {
	case len(r.hooks()) == 0:
		return "", ""
	case r.live == nil || (r.live.Status.LastAppliedRevision == "" && !anyApplied(r.oldInv)):
		return render.HookPreInstall, render.HookPostInstall
	case r.live.Status.RenderDigest != r.rendered.Digest:
		return render.HookPreUpgrade, render.HookPostUpgrade
	}
	return "", ""
}

// hookPhases are the events whose hooks this sync of r runs before its apply and
// after its objects are healthy (see hookEvents), and, when its pre hooks ran
// already for this render (an earlier attempt that failed or handed its health
// check over), none before and that event's post hooks after.
func (s *syncRun) hookPhases(ctx context.Context, r *instanceRun) (pre, post string, f *outcome.Failure) {
	pre, post = hookEvents(r)
	if pre == "" {
		return "", "", nil
	}
	rec, err := s.hookRecordOf(ctx, r)
	if err != nil {
		return "", "", outcome.NewTransient(cairnv1.ReasonHookFailed, err)
	}
	pre, post = afterEarlierRun(rec.Ran, r.rendered.Digest, pre, post)
	return pre, post, nil
}

// afterEarlierRun is pre and post, or, when ran records pre hooks that ran for this
// render, no pre and the post hooks of that event.
func afterEarlierRun(ran *hookRun, digest, pre, post string) (string, string) {
	if ran == nil || ran.Digest != digest {
		return pre, post
	}
	if ran.Event == render.HookPreInstall {
		return "", render.HookPostInstall
	}
	return "", render.HookPostUpgrade
}

// runPreHooks runs r's pre hooks of event and records that they ran for its render,
// with the hooks a removal needs.
func (s *syncRun) runPreHooks(ctx context.Context, c client.Client, r *instanceRun, event string) *outcome.Failure {
	if f := s.runHooks(ctx, c, r, event); f != nil || event == "" {
		return f
	}
	rec, err := s.hookRecordOf(ctx, r)
	if err == nil {
		rec = nextHookRecord(rec, r.hooks()) // a removal before the first success finds them too
		rec.Ran = &hookRun{Event: event, Digest: r.rendered.Digest}
		err = s.storeHookRecord(ctx, r, r.live, rec)
	}
	if err != nil {
		return outcome.NewTransient(cairnv1.ReasonHookFailed, err)
	}
	return nil
}

// runHooks runs r's hooks of event, if any, with the instance's client c.
func (s *syncRun) runHooks(ctx context.Context, c client.Client, r *instanceRun, event string) *outcome.Failure {
	if event == "" || len(render.HooksFor(r.hooks(), event)) == 0 {
		return nil
	}
	s.step(r.key(), "hooks %s: %s", r.key(), event)
	n, f := hookRunner{c: c, owner: hookOwnerOf(r.live), event: event}.run(ctx, r.hooks())
	if n > 0 {
		r.hooksRan = append(r.hooksRan, fmt.Sprintf("%d %s", n, event))
	}
	return f
}

// hooks are the Helm hooks of r's render (none without one).
func (r *instanceRun) hooks() []render.Hook {
	if r.rendered == nil {
		return nil
	}
	return r.rendered.Hooks
}

// runDeleteHooks runs the pre-delete or post-delete hooks of a removed instance
// (from its hook record) with the identity it deletes as, within its timeout.
func (s *syncRun) runDeleteHooks(ctx context.Context, c client.Client, live *cairnv1.ModuleInstance, hooks []render.Hook,
	event string) *outcome.Failure {
	if len(render.HooksFor(hooks, event)) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout(live))
	defer cancel()
	s.step(live.Namespace+"/"+live.Name, "hooks %s/%s: %s", live.Namespace, live.Name, event)
	_, f := hookRunner{c: c, owner: hookOwnerOf(live), event: event}.run(ctx, hooks)
	return f
}

// deleteLeftHooks deletes the install and upgrade hook objects a removed instance
// left, those still there and still the instance's.
func deleteLeftHooks(ctx context.Context, h hookRunner, left []cairnv1.InventoryEntry) error {
	objects, err := apply.InventoryFromEntries(left).Objects()
	if err != nil {
		return err
	}
	var errs []error
	for _, u := range objects {
		errs = append(errs, h.deleteHook(ctx, u))
	}
	return errors.Join(errs...)
}

// anyApplied reports whether inv records an object as applied (with its hash): an
// entry without one was recorded before an apply that never came.
func anyApplied(inv apply.Inventory) bool {
	for _, e := range inv {
		if e.Hash != "" {
			return true
		}
	}
	return false
}

package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/status"
)

// Holds (`cairn hold`, the annotation cairn.dev/hold; docs/rollback.md): a held
// instance stays at the render it last applied while the revisions go on. The
// revision step leaves it as it is (no input written, nothing rendered, applied or
// pruned), records the hold on its status (status.held, Held=True) and, once the
// annotation is gone, the release; a hold --until-change ends at the first revision
// that changes the instance's input (its declaration, its module, what its render
// reads), which then applies as any change.

// holds decides whether the hold of p (its CR's annotation) keeps it as it is at
// this revision, setting p.held, or ends (--until-change) and lets it go on,
// setting p.releaseHold. An instance that never applied a render has nothing to
// hold: it syncs, and is held from the revision after its first apply.
func (s *RevisionState) holds(p *instancePlan) bool {
	req := status.HoldRequested(p.was)
	if req == nil || p.was.Status.LastAppliedRevision == "" {
		return false
	}
	if req.To != "" {
		if target, err := status.RollbackTarget(p.was, req.To); err == nil && !rolledBackTo(p.was, target) {
			// Applied again first: a new input, so that whichever replica
			// reconciles the instance takes it.
			p.rollback = target
			p.inputDigest = inputDigest(p.specDigest, p.sourceDigest, p.refresh+"\x00rollback:"+target.RenderDigest)
			return false
		}
	}
	// The input as held: recorded with the hold, the first revision to see it
	// (this one, when none is recorded) counting as held, so that a commit pending
	// when the hold was asked is held too, not applied at once.
	heldInput := p.inputDigest
	if h := p.was.Status.Held; h != nil && h.InputDigest != "" {
		heldInput = h.InputDigest
	}
	if req.UntilChange && heldInput != p.inputDigest {
		p.releaseHold = true
		return false
	}
	p.held = true
	return true
}

// rolledBackTo tells whether mi stands at target already: held there (a rollback
// done), or running it, good, without a hold recorded yet.
func rolledBackTo(mi *cairnv1.ModuleInstance, target *cairnv1.HistoryEntry) bool {
	if h := mi.Status.Held; h != nil {
		return h.RenderDigest == target.RenderDigest
	}
	return mi.Status.RenderDigest == target.RenderDigest && status.IsReady(mi)
}

// rollbackWhy is why the revision applies p's rollback.
func rollbackWhy(p *instancePlan) string {
	who := ""
	if req := status.HoldRequested(p.was); req != nil && req.By != "" {
		who = " asked by " + req.By
	}
	return fmt.Sprintf("rollback to %s (revision %s)%s", p.rollback.RenderDigest, gitsource.ShortSHA(p.rollback.Revision), who)
}

// heldWhy is why the revision leaves p, held, as it is: the render it is held at
// and since when, and whether a change of it waits for the release.
func heldWhy(p *instancePlan) string {
	digest, since := p.was.Status.RenderDigest, "now"
	if h := p.was.Status.Held; h != nil {
		digest, since = h.RenderDigest, h.Since.UTC().Format(time.RFC3339)
	}
	why := fmt.Sprintf("held at %s since %s", digest, since)
	if p.was.Status.LastAttemptedInput != p.inputDigest {
		why += ": this change applies when released"
	}
	return why
}

// recordHold records on a held instance's CR that it is held, or that it was
// released while no change was waiting for it, once: an instance whose status
// says so already costs no request. It emits the Held or Released event.
func (s *RevisionState) recordHold(ctx context.Context, r *instanceState) {
	req := status.HoldRequested(r.was)
	live := r.was.DeepCopy()
	before := r.was
	switch {
	case req != nil && r.held && (!status.SameHold(r.was.Status.Held, req) || r.was.Status.Held.InputDigest == ""):
		if !status.Hold(live, req, r.inputDigest, s.now) {
			return
		}
		if err := s.patchStatusRetrying(ctx, live, before); err != nil {
			s.e.logger(ctx).Error(err, "failed to record a hold", "instance", r.key())
			return
		}
		s.e.emitHold(live, cairnv1.ReasonHeld, status.HeldMessage(live.Status.Held))
		s.step(r.key(), "%s held", r.key())
	case req == nil && status.IsHeld(r.was):
		status.Release(live)
		if err := s.patchStatusRetrying(ctx, live, before); err != nil {
			s.e.logger(ctx).Error(err, "failed to record a release", "instance", r.key())
			return
		}
		s.step(r.key(), "%s released", r.key())
	}
}

// endHold ends the hold of r when this revision finds it ended: released by
// `cairn release` (its annotation names who asked, and is removed), by hand (the
// annotation removed), or by a revision that changes a hold --until-change (the
// annotation is removed). It emits the Released event; the status records the
// release with the instance's next status write (recordHold, status.Record).
func (s *RevisionState) endHold(ctx context.Context, r *instanceState) error {
	var note string
	remove := true
	switch rel := status.ReleaseRequested(r.was); {
	case rel != nil:
		note = status.ReleasedBy(rel)
	case r.releaseHold:
		note = fmt.Sprintf("released: revision %s changes the instance (cairn hold --until-change)", s.rev.SHA)
	case status.HoldRequested(r.was) == nil && status.IsHeld(r.was):
		note, remove = "released: the annotation "+cairnv1.HoldAnnotation+" was removed", false
	default:
		return nil
	}
	if remove {
		// Only the request this revision read: one made since (a new hold) stays.
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": r.was.ResourceVersion,
			"annotations": map[string]any{cairnv1.HoldAnnotation: nil}}})
		if err := s.e.cluster.client.Patch(ctx, r.was.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("failed to end the hold of %s: %w", r.key(), err)
		}
	}
	s.e.emitHold(r.was, cairnv1.ReasonReleased, note)
	return nil
}

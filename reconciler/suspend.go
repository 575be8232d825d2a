package reconciler

import (
	"context"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/status"
)

// recordSuspended makes a suspended instance say so: its CR is mirrored from Git (so
// that suspend: true itself reaches the cluster) and gets Ready=Unknown with reason
// Suspended. Its objects are left as they are. An instance already recorded as
// suspended with the same spec costs no request.
func (s *RevisionState) recordSuspended(ctx context.Context, r *instanceState) {
	if r.was != nil && r.was.Annotations[specDigestAnnotation] == r.specDigest && status.SuspendedAs(r.was) {
		return
	}
	live, err := s.writeInput(ctx, r)
	if err != nil {
		s.e.logger(ctx).Error(err, "failed to mirror a suspended instance", "instance", r.key(), "revision", s.rev.SHA)
		return
	}
	before := live.DeepCopy()
	status.Suspended(live, status.SuspendAnnotated(live))
	if err := s.patchStatusRetrying(ctx, live, before); err != nil {
		s.e.logger(ctx).Error(err, "failed to record status", "instance", r.key(), "revision", s.rev.SHA)
	}
	s.e.emitTransition(before, live)
	s.step(r.key(), "%s suspended", r.key())
}

// reconcileRequested reports whether live carries a reconcile request not handled yet.
func reconcileRequested(live *cairnv1.ModuleInstance) bool {
	v := live.Annotations[cairnv1.ReconcileRequestAnnotation]
	return v != "" && v != live.Status.LastHandledReconcileAt
}

// markSourceReconcileHandled records on the Platform that its reconcile request
// (`cairn reconcile source`), as read when the sync began, was handled.
func markSourceReconcileHandled(p *cairnv1.Platform) {
	if v := p.Annotations[cairnv1.ReconcileRequestAnnotation]; v != "" {
		p.Status.LastHandledReconcileAt = v
	}
}

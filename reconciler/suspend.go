package reconciler

import (
	"context"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/status"
)

// suspended reports whether r is suspended: in Git (spec.suspend) or in the cluster
// (the annotation on its CR).
func (r *instanceRun) suspended() bool {
	return r.mi.Spec.Suspend || status.SuspendAnnotated(r.live)
}

// recordSuspended makes a suspended instance say so: its CR is mirrored from Git (so
// that suspend: true itself reaches the cluster) and gets Ready=Unknown with reason
// Suspended. Its objects are left as they are. An instance already recorded as
// suspended with the same spec costs no request.
func (s *syncRun) recordSuspended(ctx context.Context, r *instanceRun) {
	if r.live != nil && r.live.Annotations[specDigestAnnotation] == r.specDigest && status.SuspendedAs(r.live) {
		return
	}
	if err := s.mirrorInstance(ctx, r); err != nil {
		s.e.logger(ctx).Error(err, "failed to mirror a suspended instance", "instance", r.key(), "revision", s.rev.SHA)
		return
	}
	before := r.live.DeepCopy()
	status.Suspended(r.live, status.SuspendAnnotated(r.live))
	if err := s.patchStatusRetrying(ctx, r.live, before); err != nil {
		s.e.logger(ctx).Error(err, "failed to record status", "instance", r.key(), "revision", s.rev.SHA)
	}
	s.e.emitTransition(before, r.live)
	s.step(r.key(), "%s suspended", r.key())
}

// satisfiesDependents reports whether the instances that depend on r may go ahead:
// r is ready, or r is suspended with its last attempt successful (its objects stay).
func (r *instanceRun) satisfiesDependents() bool {
	if r.suspended() {
		return r.live != nil && len(r.live.Status.History) > 0 && r.live.Status.History[0].Result == "Succeeded"
	}
	return r.ready()
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

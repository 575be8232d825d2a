package reconciler

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// suspendedMessage is the Ready message of a suspended instance; byAnnotation is the
// one of an instance suspended in the cluster (cairn suspend), not in Git.
const (
	suspendedMessage = "suspended: its objects are left as they are (no apply, prune or drift correction); " +
		"set spec.suspend: false to resume"
	suspendedByAnnotation = "suspended in the cluster (annotation " + cairnv1.SuspendAnnotation + ", `cairn suspend`): " +
		"its objects are left as they are (no apply, prune or drift correction) whatever Git says; `cairn resume` resumes it"
)

// suspended reports whether r is suspended: in Git (spec.suspend) or in the cluster
// (the annotation on its CR).
func (r *instanceRun) suspended() bool {
	return r.mi.Spec.Suspend || suspendAnnotated(r.live)
}

// suspendAnnotated reports whether the CR carries the suspend annotation.
func suspendAnnotated(live *cairnv1.ModuleInstance) bool {
	return live != nil && live.Annotations[cairnv1.SuspendAnnotation] == "true"
}

// recordSuspended makes a suspended instance say so: its CR is mirrored from Git (so
// that suspend: true itself reaches the cluster) and gets Ready=Unknown with reason
// Suspended. Its objects are left as they are. An instance already recorded as
// suspended with the same spec costs no request.
func (s *syncRun) recordSuspended(ctx context.Context, r *instanceRun) {
	if r.live != nil && r.live.Annotations[specDigestAnnotation] == r.specDigest && suspendedAs(r.live) {
		return
	}
	if err := s.mirrorInstance(ctx, r); err != nil {
		s.e.logger(ctx).Error(err, "failed to mirror a suspended instance", "instance", r.key(), "revision", s.rev.SHA)
		return
	}
	before := r.live.DeepCopy()
	markSuspended(r.live, suspendAnnotated(r.live))
	if err := s.patchStatusRetrying(ctx, r.live, before); err != nil {
		s.e.logger(ctx).Error(err, "failed to record status", "instance", r.key(), "revision", s.rev.SHA)
	}
	s.e.emitTransition(before, r.live)
	s.step(r.key(), "%s suspended", r.key())
}

// markSuspended sets Ready=Unknown/Suspended; the last applied revision, digests,
// inventory and history stay as they were.
func markSuspended(mi *cairnv1.ModuleInstance, byAnnotation bool) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.NextRetryAt = nil
	conditions.Delete(mi, "Reconciling")
	conditions.Delete(mi, "Stalled")
	msg := suspendedMessage
	if byAnnotation {
		msg = suspendedByAnnotation
	}
	conditions.MarkUnknown(mi, "Ready", cairnv1.ReasonSuspended, "%s", msg)
}

// isSuspended reports whether mi's CR records it as suspended.
func isSuspended(mi *cairnv1.ModuleInstance) bool {
	return mi != nil && conditions.GetReason(mi, "Ready") == cairnv1.ReasonSuspended
}

// suspendedAs reports whether live records the suspension the way it is now (by
// spec or by annotation), so that nothing needs to be written.
func suspendedAs(live *cairnv1.ModuleInstance) bool {
	want := suspendedMessage
	if suspendAnnotated(live) {
		want = suspendedByAnnotation
	}
	return isSuspended(live) && conditions.GetMessage(live, "Ready") == want
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

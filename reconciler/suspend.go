package reconciler

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// suspendedMessage is the Ready message of a suspended instance.
const suspendedMessage = "suspended: its objects are left as they are (no apply, prune or drift correction); " +
	"set spec.suspend: false to resume"

// recordSuspended makes a suspended instance say so: its CR is mirrored from Git (so
// that suspend: true itself reaches the cluster) and gets Ready=Unknown with reason
// Suspended. Its objects are left as they are. An instance already recorded as
// suspended with the same spec costs no request.
func (s *syncRun) recordSuspended(ctx context.Context, r *instanceRun) {
	if r.live != nil && r.live.Annotations[specDigestAnnotation] == r.specDigest && isSuspended(r.live) {
		return
	}
	if err := s.mirrorInstance(ctx, r); err != nil {
		s.e.logger(ctx).Error(err, "failed to mirror a suspended instance", "instance", r.key(), "revision", s.rev.SHA)
		return
	}
	before := r.live.DeepCopy()
	markSuspended(r.live)
	if err := s.patchStatusRetrying(ctx, r.live, before); err != nil {
		s.e.logger(ctx).Error(err, "failed to record status", "instance", r.key(), "revision", s.rev.SHA)
	}
	s.e.progress("%s suspended", r.key())
}

// markSuspended sets Ready=Unknown/Suspended; the last applied revision, digests,
// inventory and history stay as they were.
func markSuspended(mi *cairnv1.ModuleInstance) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.NextRetryAt = nil
	conditions.Delete(mi, "Reconciling")
	conditions.Delete(mi, "Stalled")
	conditions.MarkUnknown(mi, "Ready", cairnv1.ReasonSuspended, "%s", suspendedMessage)
}

// isSuspended reports whether mi's CR records it as suspended.
func isSuspended(mi *cairnv1.ModuleInstance) bool {
	return mi != nil && conditions.GetReason(mi, "Ready") == cairnv1.ReasonSuspended
}

// satisfiesDependents reports whether the instances that depend on r may go ahead:
// r is ready, or r is suspended with its last attempt successful (its objects stay).
func (r *instanceRun) satisfiesDependents() bool {
	if r.mi.Spec.Suspend {
		return r.live != nil && len(r.live.Status.History) > 0 && r.live.Status.History[0].Result == "Succeeded"
	}
	return r.ready()
}

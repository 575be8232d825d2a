package reconciler

import (
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

const (
	historyLimit     = 10
	stalledRecheck   = 30 * time.Minute
	transientBackoff = 5 * time.Second
	maxBackoff       = 5 * time.Minute
	healthRecheckMax = 30 * time.Second
)

// markSucceeded records a successful sync of revision on mi, Ready for reason.
func markSucceeded(mi *cairnv1.ModuleInstance, revision, reason, message string, now time.Time) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.LastAttemptedRevision = revision
	mi.Status.LastAppliedRevision = revision
	mi.Status.Failures = 0
	mi.Status.NextRetryAt = nil
	conditions.Delete(mi, "Reconciling")
	conditions.Delete(mi, "Stalled")
	conditions.MarkTrue(mi, "Ready", reason, "%s", message)
	addHistory(mi, revision, "Succeeded", reason, now)
}

// markFailed records a failed attempt of revision on mi; the last applied revision,
// digests and inventory are left as they were.
func markFailed(mi *cairnv1.ModuleInstance, revision string, f *outcome.Failure, now time.Time) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.LastAttemptedRevision = revision
	mi.Status.Failures++
	retry := metav1.NewTime(now.Add(retryAfter(f.Kind, mi.Status.Failures)))
	mi.Status.NextRetryAt = &retry
	msg := f.Error()
	if f.Kind == outcome.Progressing { // applied, health not known yet: kstatus InProgress
		conditions.MarkUnknown(mi, "Ready", f.Reason, "%s", msg)
		conditions.Delete(mi, "Stalled")
		conditions.MarkReconciling(mi, f.Reason, "%s", msg)
		addHistory(mi, revision, "Progressing", f.Reason, now)
		return
	}
	conditions.MarkFalse(mi, "Ready", f.Reason, "%s", msg)
	switch f.Kind {
	case outcome.Stalled:
		conditions.MarkStalled(mi, f.Reason, "%s", msg)
		conditions.Delete(mi, "Reconciling")
	default:
		conditions.Delete(mi, "Stalled")
		conditions.MarkReconciling(mi, f.Reason, "%s", msg)
	}
	addHistory(mi, revision, "Failed", f.Reason, now)
}

// retryAfter is 5s·2ⁿ capped at 5m for transient and waiting failures, 30m for
// stalled ones, and 5s·2ⁿ capped at 30s for a health check handed over (Progressing).
func retryAfter(kind outcome.Kind, failures int32) time.Duration {
	switch kind {
	case outcome.Stalled:
		return stalledRecheck
	case outcome.Progressing:
		return backoff(failures, healthRecheckMax)
	}
	return backoff(failures, maxBackoff)
}

func backoff(failures int32, limit time.Duration) time.Duration {
	d := transientBackoff
	for i := int32(1); i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func addHistory(mi *cairnv1.ModuleInstance, revision, result, reason string, now time.Time) {
	entry := cairnv1.HistoryEntry{
		Revision: revision, Time: metav1.NewTime(now), Result: result, Reason: reason,
		RenderDigest: mi.Status.RenderDigest,
	}
	if mi.Status.Inventory != nil {
		entry.Objects = mi.Status.Inventory.Count
	}
	mi.Status.History = append([]cairnv1.HistoryEntry{entry}, mi.Status.History...)
	if len(mi.Status.History) > historyLimit {
		mi.Status.History = mi.Status.History[:historyLimit]
	}
}

// isReady reports whether mi's Ready condition is True.
func isReady(mi *cairnv1.ModuleInstance) bool {
	return mi != nil && conditions.IsTrue(mi, "Ready")
}

// setReady sets the Ready condition of obj.
func setReady(obj conditions.Setter, ready bool, reason, message string) {
	if ready {
		conditions.MarkTrue(obj, "Ready", reason, "%s", message)
		return
	}
	conditions.MarkFalse(obj, "Ready", reason, "%s", message)
}

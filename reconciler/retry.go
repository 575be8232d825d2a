package reconciler

import (
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// retryDue decides whether a sync of revision at now retries live, an instance that
// is not ready: always on a revision it has not attempted yet (a new commit), else
// once its status.nextRetryAt has passed (5s·2ⁿ up to 5m after a transient or
// waiting failure, 30m after a stalled one; see retryAfter), and at once after an
// interrupted sync, as the interruption's message promises. It says why.
func retryDue(live *cairnv1.ModuleInstance, revision string, now time.Time) (bool, string) {
	next := live.Status.NextRetryAt
	switch {
	case live.Status.LastAttemptedRevision != revision:
		return true, "retrying a failed sync at a new revision"
	case next == nil:
		return true, "retrying a failed sync"
	case conditions.GetReason(live, "Ready") == cairnv1.ReasonInterrupted:
		return true, "resuming an interrupted sync"
	case !now.Before(next.Time):
		return true, fmt.Sprintf("retrying a failed sync (%s retry due)", failureKindOf(live))
	}
	return false, fmt.Sprintf("not retried before %s (%s)", next.UTC().Format(time.RFC3339), failureKindOf(live))
}

// failureKindOf reads back how the last failure of mi is retried.
func failureKindOf(mi *cairnv1.ModuleInstance) outcome.Kind {
	switch {
	case conditions.IsTrue(mi, "Stalled"):
		return outcome.Stalled
	case conditions.GetReason(mi, "Ready") == cairnv1.ReasonDependencyNotReady:
		return outcome.Waiting
	case conditions.GetReason(mi, "Ready") == cairnv1.ReasonProgressing:
		return outcome.Progressing
	}
	return outcome.Transient
}

// deferredResult is the result of a failed instance whose retry is not due (why),
// live its CR: it is still failed, with its last reason, and says when it is retried.
func deferredResult(res InstanceResult, live *cairnv1.ModuleInstance, why string) InstanceResult {
	res.Action, res.Retry = outcome.ActionFailed, failureKindOf(live)
	if res.Retry == outcome.Progressing {
		res.Action = outcome.ActionProgressing
	}
	res.Reason = conditions.GetReason(live, "Ready")
	res.Message = why + ": " + conditions.GetMessage(live, "Ready")
	res.NextRetryAt = retryTime(live)
	return res
}

func retryTime(mi *cairnv1.ModuleInstance) *time.Time {
	if mi == nil || mi.Status.NextRetryAt == nil {
		return nil
	}
	t := mi.Status.NextRetryAt.Time
	return &t
}

// RetryDue reports whether a retry scheduled at next (zero: none) is due at now.
func RetryDue(next, now time.Time) bool {
	return !next.IsZero() && !now.Before(next)
}

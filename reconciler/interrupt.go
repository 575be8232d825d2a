package reconciler

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/outcome"
)

// interrupted reports whether ctx ended because the sync was stopped (SIGTERM, a
// lost Lease), not because a deadline passed.
func interrupted(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// interruption is the transient failure of an instance whose sync was stopped by ctx.
func interruption(ctx context.Context, key string) *outcome.Failure {
	return outcome.NewTransient(cairnv1.ReasonInterrupted,
		fmt.Errorf("the sync of %s was interrupted (%v): the next sync resumes it", key, context.Cause(ctx)))
}

// interrupt makes r's outcome Interrupted when ctx was stopped: whatever failed after
// that failed because of it, and is reported once, as that.
func (r *instanceState) interrupt(ctx context.Context) {
	if interrupted(ctx) {
		r.failure = interruption(ctx, r.key())
	}
}

func (r *instanceReconcile) interrupt(ctx context.Context) {
	if interrupted(ctx) {
		r.failure = interruption(ctx, r.key())
	}
}

// markPlatformInterrupted records on p that the sync of sha stopped before it ended:
// Ready is False with reason Interrupted, neither Stalled nor Reconciling, and the
// last synced revision stays, so the next sync does the rest.
func markPlatformInterrupted(ctx context.Context, p *cairnv1.Platform, sha string) {
	conditions.Delete(p, "Stalled")
	conditions.Delete(p, "Reconciling")
	conditions.MarkFalse(p, "Ready", cairnv1.ReasonInterrupted, "the sync of %s was interrupted (%v) with %d of %d instances not finished",
		gitsource.ShortSHA(sha), context.Cause(ctx), p.Status.Instances.Failed, p.Status.Instances.Total)
}

// reportInterrupted reports, once, an instance the interrupted sync never started;
// its CR keeps the state of its last sync.
func (in *revisionInput) reportInterrupted(ctx context.Context, r *instanceState) {
	r.interrupt(ctx)
	in.step(r.key(), "%s %s", r.key(), r.view().outcome())
	in.logOutcome(ctx, r.view())
	in.e.opts.Reporter.InstanceFinished(in.rev.SHA, keyOf(r.mi), r.result())
}

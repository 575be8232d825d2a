package apply

import (
	"context"
	"time"

	"cairn.dev/cairn/reconciler/shard"
)

// FinishTimeout bounds the writes that finish an interrupted sync: the take-back of a
// first stage, the status and inventory that record what was done.
const FinishTimeout = 5 * time.Second

// Finishing returns ctx while it lasts; once it has ended, a context detached from it
// that lasts FinishTimeout, so that the outcome of the work done is still recorded
// (and what was written only to validate the rest is still taken back).
func Finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil || shard.Revoked(ctx) { // a shard lost: nothing more is written
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), FinishTimeout)
}

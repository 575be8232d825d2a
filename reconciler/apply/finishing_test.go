package apply

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler/shard"
)

// TestFinishing: a live context is kept; an interrupted one gives a detached context
// that lasts FinishTimeout, so that the outcome is still recorded; one whose shard is
// no longer this replica's stays ended: nothing more is written for its instances.
func TestFinishing(t *testing.T) {
	g := NewWithT(t)
	live := context.Background()
	ctx, cancel := Finishing(live)
	cancel()
	g.Expect(ctx).To(BeIdenticalTo(live))

	interrupted, stop := context.WithCancelCause(context.Background())
	stop(errors.New("SIGTERM"))
	ctx, cancel = Finishing(interrupted)
	g.Expect(ctx.Err()).NotTo(HaveOccurred(), "an interrupted sync still records what it did")
	_, hasDeadline := ctx.Deadline()
	g.Expect(hasDeadline).To(BeTrue())
	cancel()

	lost, end := context.WithCancelCause(context.Background())
	end(shard.ErrLost)
	ctx, cancel = Finishing(lost)
	defer cancel()
	g.Expect(ctx.Err()).To(HaveOccurred(), "a lost shard writes nothing more")
}

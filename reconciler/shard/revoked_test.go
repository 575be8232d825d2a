package shard

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRevoked: a context that ended because its shard is no longer this replica's is
// revoked; one cancelled or timed out for any other reason is not.
func TestRevoked(t *testing.T) {
	g := NewWithT(t)
	for _, cause := range []error{ErrLost, ErrReleased, ErrNotHeld} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		g.Expect(Revoked(ctx)).To(BeTrue(), cause.Error())
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	g.Expect(Revoked(ctx)).To(BeFalse(), "live")
	cancel(errors.New("SIGTERM"))
	g.Expect(Revoked(ctx)).To(BeFalse(), "interrupted")
	g.Expect(Revoked(notHeld(context.Background()))).To(BeTrue(), "a shard not held")
}

package shard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
)

// The causes (context.Cause) of a shard's context ending.
var (
	// ErrLost: the shard's Lease was lost: its last successful renewal is older than
	// RenewDeadline by this replica's own clock, or another replica wrote the Lease.
	ErrLost = errors.New("lost the shard's Lease")
	// ErrReleased: this replica gave the shard up, to even out the spread or because
	// Run ended.
	ErrReleased = errors.New("released the shard's Lease")
	// ErrNotHeld: the shard was not held when the context was asked for.
	ErrNotHeld = errors.New("the shard is not held by this replica")
)

// Revoked tells whether ctx ended because its shard is no longer this replica's
// (lost, released or never held): nothing more may be written for its instances,
// not even what an interrupted reconcile records on its way out.
func Revoked(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrLost) || errors.Is(cause, ErrReleased) || errors.Is(cause, ErrNotHeld)
}

// tenure is one holding of a shard by this replica, from the write that acquired its
// Lease to its loss or release; a shard acquired again is a new tenure with a new
// context, so that work cancelled with the old one never resumes under the new.
type tenure struct {
	shard  int
	ctx    context.Context
	cancel context.CancelCauseFunc
	clock  clock.Clock
	// renewDeadline is Options.RenewDeadline.
	renewDeadline time.Duration
	// renewed is when the last successful write of the Lease was sent: the clock is
	// read before the request, so that the tenure never outlives what the API server
	// recorded, whatever the request's delay.
	renewed atomic.Pointer[time.Time]
	// lease is the Lease as this replica last wrote it; only Run's goroutine uses it.
	lease *coordinationv1.Lease
	// start is when the tenure began, before its context was handed out.
	start time.Time

	mu    sync.Mutex
	ended time.Time // when the context was cancelled (zero: not yet)
}

func newTenure(parent context.Context, c clock.Clock, renewDeadline time.Duration, shard int,
	lease *coordinationv1.Lease, sent time.Time) *tenure {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	t := &tenure{shard: shard, ctx: ctx, cancel: cancel, clock: c, renewDeadline: renewDeadline,
		lease: lease, start: c.Now()}
	t.renewed.Store(&sent)
	return t
}

// deadline is when the tenure ends by this replica's own clock unless renewed.
func (t *tenure) deadline() time.Time { return t.renewed.Load().Add(t.renewDeadline) }

// renew records a successful renewal whose request was sent at sent.
func (t *tenure) renew(sent time.Time, lease *coordinationv1.Lease) {
	t.lease = lease
	t.renewed.Store(&sent)
}

// live says whether the tenure still holds. It reads the clock itself rather than
// trusting the watchdog to have run: a replica resumed after a pause (SIGSTOP, a
// long GC, a frozen VM) sees that the deadline passed before any goroutine of its own
// could act on the stale tenure.
func (t *tenure) live() bool {
	if t.ctx.Err() != nil {
		return false
	}
	if !t.clock.Now().Before(t.deadline()) {
		t.end(ErrLost)
		return false
	}
	return true
}

// end cancels the tenure's context with cause (the first cause stays).
func (t *tenure) end(cause error) {
	t.cancel(cause)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended.IsZero() {
		t.ended = t.clock.Now()
	}
}

// endedAt is when the context was cancelled (zero: not yet).
func (t *tenure) endedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// watch ends the tenure at its deadline, which renewals push back, without waiting for
// Run's loop: the loop may be stuck in an API call that has not failed yet.
func (t *tenure) watch() {
	for {
		wait := t.deadline().Sub(t.clock.Now())
		if wait <= 0 {
			t.end(ErrLost)
			return
		}
		timer := t.clock.NewTimer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// guarded is a context under a tenure: its Err also checks the tenure's deadline by
// the clock, so that a write guarded by ctx.Err() is refused the moment the deadline
// passes, even before the watchdog's timer has fired. cancel, when set, cancels the
// embedded context (a Bind child) at once when the check finds the tenure ended.
type guarded struct {
	context.Context
	t      *tenure
	cancel context.CancelCauseFunc
}

func (g guarded) Err() error {
	if err := g.Context.Err(); err != nil {
		return err
	}
	if g.t.live() {
		return nil
	}
	if g.cancel != nil {
		g.cancel(context.Cause(g.t.ctx))
	}
	return g.Context.Err()
}

// notHeld is a context that has already ended with ErrNotHeld.
func notHeld(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	cancel(ErrNotHeld)
	return ctx
}

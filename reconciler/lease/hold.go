package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// holder is one Hold: the elector runs under a context of its own, so that the Lease
// is renewed until fn has returned (fn may finish status writes after ctx ended) and
// released right after.
type holder struct {
	opts     Options
	lock     *takenLock
	fn       func(context.Context) error
	acquired chan struct{} // closed when fn starts
	done     chan struct{} // closed when fn has returned
	err      error         // fn's error
	lost     bool          // fn's context ended because the Lease was lost
}

// takenLock is the Lease lock that remembers whether it was ever taken: the elector
// starts fn in a goroutine of its own, so that is how Hold knows it must wait for fn.
type takenLock struct {
	*resourcelock.LeaseLock
	taken atomic.Bool
}

// Create creates the Lease with rec.
func (l *takenLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Create(ctx, rec)
	l.record(rec, err)
	return err
}

// Update writes rec to the Lease.
func (l *takenLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Update(ctx, rec)
	l.record(rec, err)
	return err
}

func (l *takenLock) record(rec resourcelock.LeaderElectionRecord, err error) {
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.taken.Store(true)
	}
}

func (h *holder) run(ctx context.Context) error {
	electCtx, stop := context.WithCancel(electorLogger(context.WithoutCancel(ctx), h.opts))
	defer stop()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: h.lock, Name: Name, ReleaseOnCancel: true,
		LeaseDuration: h.opts.LeaseDuration, RenewDeadline: h.opts.RenewDeadline, RetryPeriod: h.opts.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) { h.lead(ctx, leading, stop) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("failed to set up the sync Lease: %w", err)
	}
	h.sayWaiting(ctx)
	timedOut := make(chan bool, 1)
	go h.bound(ctx, stop, timedOut)
	le.Run(electCtx)
	if !h.lock.taken.Load() {
		return h.notAcquired(ctx, <-timedOut)
	}
	<-h.acquired
	<-h.done
	if !h.lost {
		h.opts.Log.Info("released the sync Lease", "lease", h.opts.Namespace+"/"+Name, "identity", h.lock.Identity())
	}
	if h.lost && h.err != nil && !errors.Is(h.err, ErrLost) {
		return fmt.Errorf("%w: %w", ErrLost, h.err)
	}
	if h.lost {
		return ErrLost
	}
	return h.err
}

// sayWaiting logs who holds the Lease when another holder has it.
func (h *holder) sayWaiting(ctx context.Context) {
	rec, _, err := h.lock.Get(ctx)
	if err == nil && rec.HolderIdentity != "" && rec.HolderIdentity != h.lock.Identity() {
		h.opts.Log.Info("waiting for the sync Lease", "lease", h.opts.Namespace+"/"+Name, "holder", rec.HolderIdentity,
			"renewed", rec.RenewTime.UTC().Format(time.RFC3339), "timeout", h.opts.Wait.String())
	}
}

// bound stops waiting for the Lease after opts.Wait or when ctx ends, unless it was
// taken first; it says whether the wait timed out.
func (h *holder) bound(ctx context.Context, stop context.CancelFunc, timedOut chan<- bool) {
	t := time.NewTimer(h.opts.Wait)
	defer t.Stop()
	select {
	case <-h.acquired:
		timedOut <- false
		return
	case <-ctx.Done():
		timedOut <- false
	case <-t.C:
		timedOut <- true
	}
	stop()
}

// lead runs fn while the Lease is held: its context ends with ctx or when the Lease
// is lost (leading ends), whichever comes first; the elector stops when fn returns.
func (h *holder) lead(ctx, leading context.Context, stop context.CancelFunc) {
	close(h.acquired)
	defer close(h.done)
	h.opts.Log.Info("holding the sync Lease", "lease", h.opts.Namespace+"/"+Name, "identity", h.lock.Identity())
	defer stop()
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	unwatch := context.AfterFunc(leading, func() { cancel(ErrLost) })
	defer unwatch()
	h.err = h.fn(fnCtx)
	h.lost = errors.Is(context.Cause(fnCtx), ErrLost)
}

// notAcquired is the error of a Hold that never took the Lease.
func (h *holder) notAcquired(ctx context.Context, timedOut bool) error {
	if !timedOut {
		return ctx.Err()
	}
	rec, _, err := h.lock.Get(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("failed to take Lease %s/%s within %s: %w", h.opts.Namespace, Name, h.opts.Wait, err)
	}
	return &HeldError{Namespace: h.opts.Namespace, Holder: rec.HolderIdentity, RenewTime: rec.RenewTime.Time, Waited: h.opts.Wait}
}

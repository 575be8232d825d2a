package shard

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	testclock "k8s.io/utils/clock/testing"
)

// TestPausedReplicaStopsByItsOwnClock: replica a holds the one shard; then it is
// paused (as by SIGSTOP) for longer than the lease, either at the start of a period or
// right before it sends a renewal. Its shard's context ends by its own clock within
// RenewDeadline of its last renewal, before any API call of its own failed and before
// b takes the shard; once resumed, a writes nothing to the Lease it lost (at most the
// renewal it was about to send, which the resourceVersion turns down).
func TestPausedReplicaStopsByItsOwnClock(t *testing.T) {
	for _, where := range []string{"period", "write"} {
		t.Run(where, func(t *testing.T) {
			gr := newGroup(t)
			var paused atomic.Bool
			resume := make(chan struct{})
			var resumeOnce sync.Once
			unpause := func() { resumeOnce.Do(func() { close(resume) }) }
			defer unpause() // before the group's cleanup waits for a's Run
			entered := make(chan struct{}, 1)
			pause := func() {
				if paused.Load() {
					select {
					case entered <- struct{}{}:
					default:
					}
					<-resume
				}
			}
			a := gr.start("a", 1, func(s *Set) {
				if where == "period" {
					s.hooks.period = pause
				} else {
					s.hooks.write = func(lease string) {
						if lease == LeaseName(0) {
							pause()
						}
					}
				}
			})
			gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0}))
			b := gr.start("b", 1)
			gr.g.Consistently(b.set.Held, 300*time.Millisecond, 10*time.Millisecond).Should(BeEmpty(), "one shard, held by a")
			ctx, ok := a.set.Context("team", "web")
			gr.g.Expect(ok).To(BeTrue(), "%v", context.Cause(ctx))

			paused.Store(true)
			<-entered
			a.set.mu.Lock()
			aTenure := a.set.tenures[0]
			a.set.mu.Unlock()
			lastRenewed := *aTenure.renewed.Load()
			gr.g.Eventually(ctx.Done(), 2*testLease).Should(BeClosed())
			gr.g.Expect(context.Cause(ctx)).To(MatchError(ErrLost))
			gr.g.Expect(gr.api.failedWritesBy("a")).To(BeEmpty(), "no API call of a failed: a is paused")
			gr.g.Expect(a.set.Held()).To(BeEmpty())
			gr.g.Expect(a.set.Owns("team", "web")).To(BeFalse())
			// The times the Set recorded, not when this goroutine noticed: a loaded
			// machine may run it late.
			lost := aTenure.endedAt()
			t.Logf("a's context ended %s after its last renewal", lost.Sub(lastRenewed).Round(time.Millisecond))
			gr.g.Expect(lost.Sub(lastRenewed)).To(BeNumerically(">=", testDeadline), "not before RenewDeadline")

			gr.g.Eventually(b.set.Held, 2*testLease, 5*time.Millisecond).Should(Equal([]int{0}))
			bTenure := gr.tenureOf("b", 0)
			gr.g.Expect(lost).To(BeTemporally("<", bTenure.start), "a's context ended before b's began")
			gr.g.Expect(bTenure.start.Sub(lastRenewed)).To(BeNumerically(">=", testLease), "b took the shard only after the lease")

			paused.Store(false)
			unpause()
			gr.g.Consistently(func() string { return holderOf(gr.api.lease(gr.g, LeaseName(0))) }, 10*testRetry, 10*time.Millisecond).
				Should(Equal("b"))
			gr.g.Expect(a.set.Held()).To(BeEmpty())
			writes := gr.api.writesBy("a", LeaseName(0), lost)
			for _, w := range writes {
				gr.g.Expect(w.err).To(HaveOccurred(), "no write of a to the Lease it lost went through: %+v", w)
				gr.g.Expect(apierrors.IsConflict(w.err)).To(BeTrue(), "%v", w.err)
			}
			if where == "period" {
				gr.g.Expect(writes).To(BeEmpty(), "a did not even try: its own clock said the shard was lost")
			} else {
				gr.g.Expect(writes).To(HaveLen(1), "only the renewal a was sending when it was paused")
			}
		})
	}
}

// TestOwnClockIsReadByErr: with a fake clock and Run's loop held still, moving the
// clock past RenewDeadline ends the shard at once for whoever asks (ctx.Err(), Held,
// Owns, Context), without any goroutine having run; the loop then writes nothing to
// the Lease.
func TestOwnClockIsReadByErr(t *testing.T) {
	g := NewWithT(t)
	api := newFakeAPI()
	clk := testclock.NewFakeClock(time.Now())
	opts := fastOptions("a", 2)
	opts.Clock = clk
	s, err := New(api.as("a"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	var hold atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	s.hooks.period = func() {
		if hold.Load() {
			close(held)
			<-release
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	g.Eventually(clk.HasWaiters).Should(BeTrue(), "the first period is over")
	clk.Step(opts.RetryPeriod)
	g.Eventually(s.Held).Should(Equal([]int{0, 1}))
	g.Eventually(clk.Waiters).Should(Equal(3), "the loop and two watchdogs wait")
	shardCtx, ok := s.Context("team", keyIn(1, 2))
	g.Expect(ok).To(BeTrue())
	bound, stop, ok := s.Bind(context.Background(), "team", keyIn(1, 2))
	g.Expect(ok).To(BeTrue())
	defer stop()

	hold.Store(true)
	clk.Step(opts.RetryPeriod)
	<-held
	began := time.Now()
	clk.Step(opts.RenewDeadline)
	g.Expect(shardCtx.Err()).To(HaveOccurred(), "Err reads the clock")
	g.Expect(context.Cause(shardCtx)).To(MatchError(ErrLost))
	g.Expect(bound.Err()).To(HaveOccurred())
	g.Expect(context.Cause(bound)).To(MatchError(ErrLost))
	g.Expect(s.Held()).To(BeEmpty())
	g.Expect(s.Owns("team", keyIn(0, 2))).To(BeFalse())
	_, ok = s.Context("team", keyIn(0, 2))
	g.Expect(ok).To(BeFalse())

	close(release)
	g.Eventually(clk.HasWaiters).Should(BeTrue())
	g.Expect(api.writesBy("a", LeaseName(0), began)).To(BeEmpty(), "nothing written to a lost Lease")
	g.Expect(api.writesBy("a", LeaseName(1), began)).To(BeEmpty(), "nothing written to a lost Lease")
	cancel()
	g.Expect(<-done).To(Succeed())
	g.Expect(api.writesBy("a", LeaseName(0), began)).To(BeEmpty(), "a lost Lease is not released either")
}

package shard

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestOneReplicaTakesAllShards(t *testing.T) {
	gr := newGroup(t)
	a := gr.start("a", 4)
	gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1, 2, 3}))
	gr.g.Expect(gr.holders(4)).To(Equal([]string{"a", "a", "a", "a"}))
	member := gr.api.lease(gr.g, MemberLeaseName("a"))
	gr.g.Expect(member).NotTo(BeNil())
	gr.g.Expect(holderOf(member)).To(Equal("a"))
	gr.g.Expect(member.Annotations).To(HaveKeyWithValue(shardsAnnotation, "4"))
	for i := range 4 {
		name := keyIn(i, 4)
		gr.g.Expect(a.set.Owns("team", name)).To(BeTrue())
		ctx, ok := a.set.Context("team", name)
		gr.g.Expect(ok).To(BeTrue())
		gr.g.Expect(ctx.Err()).NotTo(HaveOccurred())
	}
	gr.g.Eventually(a.heldByEvents).Should(Equal([]int{0, 1, 2, 3}), "OnChange told of every shard")
	// Renewals keep the shards well past the lease duration.
	gr.g.Consistently(a.set.Held, testLease+testRetry, 20*time.Millisecond).Should(Equal([]int{0, 1, 2, 3}))
}

// TestTheOnlyShardIsTakenAtTheFirstLook: a replica takes its shards in its second
// period (replicas started together first see each other), but the one shard of
// the controller's default at its first look: there is no spread to even out, and a
// controller's first sync would otherwise wait a RetryPeriod for it.
func TestTheOnlyShardIsTakenAtTheFirstLook(t *testing.T) {
	for _, tc := range []struct{ shards, period int32 }{{shards: 1, period: 1}, {shards: 2, period: 2}} {
		t.Run(strconv.Itoa(int(tc.shards)), func(t *testing.T) {
			gr := newGroup(t)
			var periods, tookIn atomic.Int32
			a := gr.start("a", int(tc.shards), func(s *Set) {
				s.hooks.period = func() { periods.Add(1) }
				told := s.opts.OnChange
				s.opts.OnChange = func(acquired, lost []int) {
					tookIn.CompareAndSwap(0, periods.Load())
					told(acquired, lost)
				}
			})
			gr.g.Eventually(func() int { return len(a.set.Held()) }, 3*time.Second, 10*time.Millisecond).Should(BeEquivalentTo(tc.shards))
			gr.g.Expect(tookIn.Load()).To(Equal(tc.period))
		})
	}
	// Two replicas started together with one shard: one holds it, the other waits.
	gr := newGroup(t)
	a, b := gr.start("a", 1), gr.start("b", 1)
	gr.g.Eventually(func() []int { return sortedDesc(gr.spread(a, b)) }, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{1, 0}))
	gr.g.Consistently(func() []int { return sortedDesc(gr.spread(a, b)) }, testLease+testRetry, 20*time.Millisecond).Should(Equal([]int{1, 0}))
}

func TestReplicasConvergeToAnEvenSpread(t *testing.T) {
	for _, tc := range []struct {
		shards int
		want   []int // shards held, most first
	}{
		{shards: 3, want: []int{1, 1, 1}},
		{shards: 4, want: []int{2, 1, 1}},
		{shards: 7, want: []int{3, 2, 2}},
	} {
		t.Run(strconv.Itoa(tc.shards), func(t *testing.T) {
			gr := newGroup(t)
			rs := []*replica{gr.start("a", tc.shards), gr.start("b", tc.shards), gr.start("c", tc.shards)}
			gr.g.Eventually(func() []int { return sortedDesc(gr.spread(rs...)) }, 5*time.Second, 10*time.Millisecond).
				Should(Equal(tc.want))
			// Converged means stable: no shard changes hands once the spread is even.
			held := [][]int{rs[0].set.Held(), rs[1].set.Held(), rs[2].set.Held()}
			gr.g.Consistently(func() [][]int { return [][]int{rs[0].set.Held(), rs[1].set.Held(), rs[2].set.Held()} },
				time.Second, 20*time.Millisecond).Should(Equal(held))
			for i, r := range rs {
				gr.g.Expect(r.heldByEvents()).To(Equal(held[i]), "OnChange adds up to what %s holds", r.id)
			}
		})
	}
}

// TestJoiningReplicasTakeShardsFromTheFirst: the first replica holds all shards; as a
// second and a third join, it gives shards up, one at a time, to them.
func TestJoiningReplicasTakeShardsFromTheFirst(t *testing.T) {
	gr := newGroup(t)
	a := gr.start("a", 3)
	gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1, 2}))
	b := gr.start("b", 3)
	gr.g.Eventually(func() []int { return gr.spread(a, b) }, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{2, 1}))
	c := gr.start("c", 3)
	gr.g.Eventually(func() []int { return gr.spread(a, b, c) }, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{1, 1, 1}))
	gr.g.Expect(a.heldByEvents()).To(Equal(a.set.Held()))
	gr.g.Expect(a.lostCount()).To(Equal(2), "a gave up exactly the two shards the others needed")
}

// TestStoppedReplicaReleasesItsShards: a replica whose Run ends cancels its contexts,
// frees its Leases and deletes its membership, so that the others take its shard at
// once rather than after the lease duration.
func TestStoppedReplicaReleasesItsShards(t *testing.T) {
	gr := newGroup(t)
	a, b, c := gr.start("a", 3), gr.start("b", 3), gr.start("c", 3)
	gr.g.Eventually(func() []int { return gr.spread(a, b, c) }, 5*time.Second, 10*time.Millisecond).Should(Equal([]int{1, 1, 1}))
	shard := a.set.Held()[0]
	ctx, ok := a.set.Context("team", keyIn(shard, 3))
	gr.g.Expect(ok).To(BeTrue())

	stopped := time.Now()
	gr.g.Expect(a.stop()).To(Succeed())
	gr.g.Expect(ctx.Err()).To(HaveOccurred())
	gr.g.Expect(context.Cause(ctx)).To(MatchError(ErrReleased))
	gr.g.Expect(a.set.Held()).To(BeEmpty())
	gr.g.Expect(a.set.Owns("team", keyIn(shard, 3))).To(BeFalse())
	gr.g.Expect(gr.api.lease(gr.g, MemberLeaseName("a"))).To(BeNil(), "membership deleted")
	gr.g.Expect(holderOf(gr.api.lease(gr.g, LeaseName(shard)))).NotTo(Equal("a"))
	gr.g.Expect(a.heldByEvents()).To(BeEmpty())

	gr.g.Eventually(func() []int { return sortedDesc(gr.spread(b, c)) }, 3*time.Second, 5*time.Millisecond).Should(Equal([]int{2, 1}))
	took := time.Since(stopped)
	t.Logf("the others took the released shard in %s", took.Round(time.Millisecond))
	gr.g.Expect(took).To(BeNumerically("<", testLease/2), "taken at once, not after the lease duration")
	gr.g.Expect(gr.holders(3)).NotTo(ContainElement("a"))
}

// TestDeadReplicasShardsAreTakenAfterTheLease: a replica that stops renewing without
// releasing (it died) keeps its shards from the others for the lease duration only.
func TestDeadReplicasShardsAreTakenAfterTheLease(t *testing.T) {
	gr := newGroup(t)
	frozen := make(chan struct{})
	defer close(frozen)
	var dead atomic.Bool
	a := gr.start("a", 2, func(s *Set) {
		s.hooks.period = func() {
			if dead.Load() {
				<-frozen
			}
		}
	})
	gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1}))
	b := gr.start("b", 2)
	gr.g.Eventually(func() []int { return gr.spread(a, b) }, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{1, 1}))
	shard := a.set.Held()[0]
	a.set.mu.Lock()
	dead.Store(true)
	lastRenewed := *a.set.tenures[shard].renewed.Load()
	a.set.mu.Unlock()

	gr.g.Eventually(b.set.Held, 2*testLease, 5*time.Millisecond).Should(Equal([]int{0, 1}))
	took := time.Since(lastRenewed)
	t.Logf("b took a's shard %s after a's last renewal", took.Round(time.Millisecond))
	gr.g.Expect(took).To(BeNumerically(">=", testLease), "not before the lease duration")
	gr.g.Expect(took).To(BeNumerically("<", testLease+6*testRetry), "within the lease duration and a few retry periods")
}

// TestRunEndingMidPeriodStillReleases: Run's context ends while a renewal is in
// flight; the contexts end at once, and the Leases are still released.
func TestRunEndingMidPeriodStillReleases(t *testing.T) {
	gr := newGroup(t)
	var block atomic.Bool
	blocked, unblock := make(chan struct{}), make(chan struct{})
	defer func() {
		if block.Swap(false) {
			close(unblock)
		}
	}()
	a := gr.start("a", 2, func(s *Set) {
		s.hooks.write = func(lease string) {
			if lease == LeaseName(1) && block.Load() {
				close(blocked)
				<-unblock
			}
		}
	})
	gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1}))
	ctx, ok := a.set.Context("team", keyIn(1, 2))
	gr.g.Expect(ok).To(BeTrue())
	block.Store(true)
	<-blocked
	a.cancel()
	gr.g.Eventually(ctx.Done()).Should(BeClosed(), "the context ends with Run's, not after the renewal")
	gr.g.Expect(context.Cause(ctx)).To(MatchError(ErrReleased))
	block.Store(false)
	close(unblock)
	gr.g.Expect(a.stop()).To(Succeed())
	gr.g.Expect(gr.holders(2)).To(Equal([]string{"", ""}), "both Leases released")
	gr.g.Expect(a.heldByEvents()).To(BeEmpty())
}

// TestReplicasDividingDifferentlyTakeNothingFromEachOther: while a replica with 3
// shards lives, one with 4 takes no shard (the two would hash an instance into
// different shards); once it has left, the new one takes them all.
func TestReplicasDividingDifferentlyTakeNothingFromEachOther(t *testing.T) {
	gr := newGroup(t)
	old := gr.start("old", 3)
	gr.g.Eventually(old.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1, 2}))
	next := gr.start("new", 4)
	gr.g.Consistently(next.set.Held, 10*testRetry, 10*time.Millisecond).Should(BeEmpty())
	gr.g.Expect(old.set.Held()).To(Equal([]int{0, 1, 2}), "nor does the old one give any up")
	gr.g.Expect(gr.api.lease(gr.g, LeaseName(3))).To(BeNil(), "shard 3 is not taken either")
	gr.g.Expect(old.stop()).To(Succeed())
	gr.g.Eventually(next.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1, 2, 3}))
}

// TestBindEndsWithTheShardOrTheParent: Bind's context ends when the shard is released
// (cause ErrReleased) or when its parent ends; for a shard not held it has ended.
func TestBindEndsWithTheShardOrTheParent(t *testing.T) {
	gr := newGroup(t)
	a := gr.start("a", 2)
	gr.g.Eventually(a.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{0, 1}))

	parent, cancelParent := context.WithCancel(context.Background())
	byParent, stop, ok := a.set.Bind(parent, "team", keyIn(0, 2))
	gr.g.Expect(ok).To(BeTrue())
	defer stop()
	cancelParent()
	gr.g.Eventually(byParent.Done()).Should(BeClosed())
	gr.g.Expect(context.Cause(byParent)).To(MatchError(context.Canceled))
	gr.g.Expect(a.set.Held()).To(Equal([]int{0, 1}), "the shard is still held")

	byShard, stop2, ok := a.set.Bind(context.Background(), "team", keyIn(1, 2))
	gr.g.Expect(ok).To(BeTrue())
	defer stop2()
	b := gr.start("b", 2)
	gr.g.Eventually(byShard.Done(), 3*time.Second).Should(BeClosed(), "a gives shard 1 up to b")
	gr.g.Expect(context.Cause(byShard)).To(MatchError(ErrReleased))
	gr.g.Eventually(b.set.Held, 3*time.Second, 10*time.Millisecond).Should(Equal([]int{1}))

	notHeld, stop3, ok := a.set.Bind(context.Background(), "team", keyIn(1, 2))
	defer stop3()
	gr.g.Expect(ok).To(BeFalse())
	gr.g.Expect(context.Cause(notHeld)).To(MatchError(ErrNotHeld))
}

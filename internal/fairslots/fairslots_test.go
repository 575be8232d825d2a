package fairslots

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// queued returns the number of requests waiting.
func (s *Slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// acquireAsync starts Acquire for tenant and returns the channel its result
// arrives on.
func acquireAsync(ctx context.Context, s *Slots, tenant string) chan error {
	done := make(chan error, 1)
	go func() { done <- s.Acquire(ctx, tenant) }()
	return done
}

// TestATenantNeverTakesTheLastFreeSlot: a tenant alone takes all but one slot;
// the last goes at once to another tenant that arrives later, and the tenant's
// own next request waits for one of its own slots to be released.
func TestATenantNeverTakesTheLastFreeSlot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := New(4)
	for range 3 {
		g.Expect(s.Acquire(ctx, "attacker")).To(Succeed())
	}
	fourth := acquireAsync(ctx, s, "attacker")
	g.Consistently(fourth, 50*time.Millisecond).ShouldNot(Receive(), "the last slot stays for another tenant")
	g.Expect(s.Acquire(ctx, "victim")).To(Succeed(), "the victim finds a slot at once")
	g.Expect(s.Held("attacker")).To(Equal(3))

	s.Release("victim")
	g.Consistently(fourth, 50*time.Millisecond).ShouldNot(Receive(), "still the last free slot")
	s.Release("attacker")
	g.Eventually(fourth).Should(Receive(BeNil()))
	g.Expect(s.Held("attacker")).To(Equal(3))
}

// TestTenantsAreServedInTurn: with every slot held by the platform team and
// three requests of tenant a queued before one of tenant c, the first release
// goes to a's earliest request, the second to c (a would take the last free
// slot), the next to a again once c's is back: c never waits behind a's queue.
func TestTenantsAreServedInTurn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := New(4)
	for range 4 {
		g.Expect(s.Acquire(ctx, "")).To(Succeed())
	}
	var queued []chan error
	for range 3 {
		queued = append(queued, acquireAsync(ctx, s, "a"))
		g.Eventually(s.queued).Should(Equal(len(queued)))
	}
	victim := acquireAsync(ctx, s, "c")
	g.Eventually(s.queued).Should(Equal(4))

	s.Release("")
	g.Eventually(queued[0]).Should(Receive(BeNil()), "the earliest request")
	s.Release("")
	g.Eventually(victim).Should(Receive(BeNil()), "c holds none: served before a's second request")
	s.Release("")
	g.Consistently(queued[1], 30*time.Millisecond).ShouldNot(Receive(), "a holds one: not the last free slot")
	s.Release("")
	g.Eventually(queued[1]).Should(Receive(BeNil()))
	g.Expect(s.Held("a")).To(Equal(2))
	g.Expect(s.Held("c")).To(Equal(1))
}

// TestPlatformTeamUsesEverySlot: requests of the platform team (""), as in a
// Platform without tenants, use every slot: there is no one to keep one for.
func TestPlatformTeamUsesEverySlot(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s := New(3)
	for range 3 {
		g.Expect(s.Acquire(ctx, "")).To(Succeed())
	}
	g.Expect(s.Held("")).To(Equal(3))
}

// TestOneSlotIsSharedInTurn: with a single slot a tenant may hold it (there is
// nothing to keep), and when it is released it goes to the other tenant, whose
// request came after the holder's next one.
func TestOneSlotIsSharedInTurn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := New(1)
	g.Expect(s.Acquire(ctx, "a")).To(Succeed())
	a2 := acquireAsync(ctx, s, "a")
	g.Eventually(s.queued).Should(Equal(1))
	b := acquireAsync(ctx, s, "b")
	g.Eventually(s.queued).Should(Equal(2))
	s.Release("a")
	g.Eventually(b).Should(Receive(BeNil()), "a was served last")
	g.Consistently(a2, 20*time.Millisecond).ShouldNot(Receive())
	s.Release("b")
	g.Eventually(a2).Should(Receive(BeNil()))
}

// TestAWaitEndsWithItsContext: a request whose context ends stops waiting with
// the context's error, holds nothing, and the slot freed later goes to the next.
func TestAWaitEndsWithItsContext(t *testing.T) {
	g := NewWithT(t)
	s := New(1)
	g.Expect(s.Acquire(context.Background(), "a")).To(Succeed())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	g.Expect(s.Acquire(ctx, "b")).To(MatchError(context.DeadlineExceeded))
	g.Expect(s.Held("b")).To(BeZero())
	c := acquireAsync(context.Background(), s, "c")
	s.Release("a")
	g.Eventually(c).Should(Receive(BeNil()))
}

// TestSlotsNeverExceedTheirSize: many tenants acquiring and releasing at once
// never hold more than the size together, and every request is served.
func TestSlotsNeverExceedTheirSize(t *testing.T) {
	g := NewWithT(t)
	s := New(3)
	var mu sync.Mutex
	inUse, peak := 0, 0
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			tenant := []string{"a", "a", "a", "b", ""}[i%5]
			g.Expect(s.Acquire(context.Background(), tenant)).To(Succeed())
			mu.Lock()
			inUse++
			peak = max(peak, inUse)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inUse--
			mu.Unlock()
			s.Release(tenant)
		})
	}
	wg.Wait()
	g.Expect(peak).To(BeNumerically("<=", 3))
	g.Expect(peak).To(BeNumerically(">=", 2))
	for _, tenant := range []string{"a", "b", ""} {
		g.Expect(s.Held(tenant)).To(BeZero())
	}
}

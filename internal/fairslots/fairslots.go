package fairslots

import (
	"context"
	"sync"
)

// Slots is a semaphore of a fixed size whose holders belong to tenants.
//
// A request takes a free slot at once, with one exception: a named tenant
// (not "", the platform team's) that already holds a slot may not take the last
// free one, which stays for a tenant that holds none. One tenant thus holds at
// most size-1 slots while it is the only one asking (all of them when size is
// 1), and a tenant that arrives later finds a slot free. When a slot is
// released it goes to a waiting request of the tenant that holds the fewest
// slots, among those of the tenant served least recently, the earliest such
// request first: the tenants' queues are served in turn, whatever their
// lengths and order of arrival.
type Slots struct {
	mu      sync.Mutex
	size    int
	used    int
	held    map[string]int
	waiting []*waiter // in order of arrival
	// served is when each tenant was last given a slot (a count of grants).
	served map[string]uint64
	grants uint64
}

type waiter struct {
	tenant  string
	granted chan struct{} // closed when the slot is the waiter's
}

// New returns size slots (at least one).
func New(size int) *Slots {
	return &Slots{size: max(size, 1), held: map[string]int{}, served: map[string]uint64{}}
}

// Size is the number of slots.
func (s *Slots) Size() int { return s.size }

// Acquire takes a slot for tenant, waiting within ctx; it returns ctx's error
// when ctx ends first, holding nothing then.
func (s *Slots) Acquire(ctx context.Context, tenant string) error {
	s.mu.Lock()
	if len(s.waiting) == 0 && s.mayTake(tenant) {
		s.take(tenant)
		s.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, granted: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	s.grant() // the new request may be served before earlier ones that must wait
	s.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted meanwhile: give it back
		s.put(tenant)
	default:
		s.remove(w)
	}
	return ctx.Err()
}

// Release gives back a slot that tenant holds.
func (s *Slots) Release(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[tenant] <= 0 {
		panic("fairslots: release of a slot the tenant does not hold")
	}
	s.put(tenant)
}

// put frees a slot of tenant and hands the free slots on.
func (s *Slots) put(tenant string) {
	if s.held[tenant]--; s.held[tenant] == 0 {
		delete(s.held, tenant)
	}
	s.used--
	s.grant()
}

// Held returns the slots tenant holds.
func (s *Slots) Held(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[tenant]
}

// mayTake reports whether tenant may take a free slot now.
func (s *Slots) mayTake(tenant string) bool {
	free := s.size - s.used
	switch {
	case free <= 0:
		return false
	case free > 1 || tenant == "":
		return true
	}
	return s.held[tenant] == 0 // the last free slot
}

func (s *Slots) take(tenant string) {
	s.held[tenant]++
	s.used++
	s.grants++
	s.served[tenant] = s.grants
}

// grant hands free slots to waiting requests: each time to a request of the
// tenant that may take one and holds the fewest, then was served least
// recently, the earliest first.
func (s *Slots) grant() {
	for {
		best := -1
		for i, w := range s.waiting {
			if s.mayTake(w.tenant) && (best < 0 || s.before(w.tenant, s.waiting[best].tenant)) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := s.waiting[best]
		s.waiting = append(s.waiting[:best], s.waiting[best+1:]...)
		s.take(w.tenant)
		close(w.granted)
	}
}

// before reports whether tenant a's requests come before b's.
func (s *Slots) before(a, b string) bool {
	if s.held[a] != s.held[b] {
		return s.held[a] < s.held[b]
	}
	return s.served[a] < s.served[b]
}

func (s *Slots) remove(w *waiter) {
	for i, x := range s.waiting {
		if x == w {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}

package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
)

// Set is one replica's share of the shards: Run takes, renews and gives up the shards'
// Leases; the other methods answer from any goroutine which shards it holds.
type Set struct {
	leases coordinationv1client.LeaseInterface
	opts   Options
	clock  clock.Clock
	log    logr.Logger
	// memberName is the name of this replica's membership Lease.
	memberName string

	mu      sync.Mutex
	tenures map[int]*tenure // by shard; an ended tenure stays until Run's loop drops it
	started bool

	// Run's goroutine only.
	loop loopState
	// hooks let tests pause the loop (nil in production).
	hooks hooks
}

// hooks are the test's hands in Run's loop.
type hooks struct {
	period func()             // at the start of each period
	write  func(lease string) // right before each write of a Lease is sent
	tenure func(*tenure)      // when a tenure begins, before its context is handed out
}

// New returns the Set of the replica opts.Identity; c is the Lease client of cairn's
// namespace's cluster (kubernetes.Interface's CoordinationV1() is one). Nothing is
// held until Run.
func New(c coordinationv1client.LeasesGetter, opts Options) (*Set, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Set{leases: c.Leases(opts.Namespace), opts: opts, clock: opts.Clock, log: opts.Log,
		memberName: MemberLeaseName(opts.Identity), tenures: map[int]*tenure{}}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log.GetSink() == nil {
		s.log = logr.Discard()
	}
	s.log = s.log.WithValues("identity", opts.Identity)
	s.loop.observed = map[string]observation{}
	return s, nil
}

// Shards is the number of shards (Options.Shards).
func (s *Set) Shards() int { return s.opts.Shards }

// Held returns the shards held now, in ascending order: those whose context is live.
func (s *Set) Held() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var held []int
	for i, t := range s.tenures {
		if t.live() {
			held = append(held, i)
		}
	}
	slices.Sort(held)
	return held
}

// Owns says whether the instance namespace/name falls in a shard held now.
func (s *Set) Owns(namespace, name string) bool {
	_, ok := s.current(Of(namespace, name, s.opts.Shards))
	return ok
}

// Context returns the context of the shard of the instance namespace/name and true
// while that shard is held; it ends the moment the shard is lost or released, with
// ErrLost or ErrReleased as its cause. Its Err reads the clock too, so it reports a
// passed deadline even before the timer has cancelled it (contexts derived from it
// end with that timer). An instance's reconcile
// runs under it (see Bind) so that a lost shard stops its writes. When the shard is
// not held, the context returned has already ended (cause ErrNotHeld) and ok is false.
func (s *Set) Context(namespace, name string) (ctx context.Context, ok bool) {
	t, ok := s.current(Of(namespace, name, s.opts.Shards))
	if !ok {
		return notHeld(context.Background()), false
	}
	return guarded{Context: t.ctx, t: t}, true
}

// Bind derives from parent (such as the context controller-runtime gives Reconcile) a
// context that also ends when the shard of namespace/name is lost or released, with
// that cause; cancel releases its resources. ok is false, and ctx has already ended,
// when the shard is not held.
func (s *Set) Bind(parent context.Context, namespace, name string) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	t, ok := s.current(Of(namespace, name, s.opts.Shards))
	if !ok {
		return notHeld(parent), func() {}, false
	}
	child, cancelChild := context.WithCancelCause(parent)
	stop := context.AfterFunc(t.ctx, func() { cancelChild(context.Cause(t.ctx)) })
	return guarded{Context: child, t: t, cancel: cancelChild}, func() { stop(); cancelChild(context.Canceled) }, true
}

// current is the live tenure of shard i.
func (s *Set) current(i int) (*tenure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenures[i]
	if t == nil || !t.live() {
		return nil, false
	}
	return t, true
}

// Start is Run, so that a Set is a controller-runtime Runnable (mgr.Add(set)).
func (s *Set) Start(ctx context.Context) error { return s.Run(ctx) }

// NeedLeaderElection says that every replica runs its Set, not only the leader: the
// shards are how the replicas share the work.
func (s *Set) NeedLeaderElection() bool { return false }

// Run takes and keeps this replica's share of the shards until ctx ends, every
// RetryPeriod: it renews its membership Lease and the Leases of its shards, reads all
// Leases, then acquires free or expired shards up to its share or releases one above
// it. When ctx ends, it cancels its shards' contexts, deletes its membership Lease and
// releases its shards' Leases so that the other replicas take them at once; it returns
// an error only when that release failed (the Leases then expire).
func (s *Set) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("shard: Run was called twice on one Set")
	}
	s.started = true
	s.mu.Unlock()
	s.log.Info("taking shards", "shards", s.opts.Shards, "namespace", s.opts.Namespace)
	// The contexts end as soon as ctx does, even while the loop is in an API call.
	stopEnding := context.AfterFunc(ctx, func() { s.endAll(ErrReleased) })
	defer stopEnding()
	for {
		s.period(ctx)
		select {
		case <-ctx.Done():
			return s.leave(ctx)
		case <-s.clock.After(s.opts.RetryPeriod):
		}
	}
}

// endAll ends every tenure with cause.
func (s *Set) endAll(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tenures {
		t.end(cause)
	}
}

// leave gives everything up at the end of Run: the membership Lease first, so that the
// others count one replica fewer by the time they see the free shards, then each
// shard's Lease, unless its tenure had already passed its deadline: a lost shard's
// Lease is not written again.
func (s *Set) leave(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.RenewDeadline)
	defer cancel()
	var errs []error
	if err := s.deleteMember(ctx); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	tenures := s.tenures
	s.tenures = map[int]*tenure{}
	s.mu.Unlock()
	var ch change
	for _, i := range sortedKeys(tenures) {
		t := tenures[i]
		t.end(ErrReleased)
		ch.lost = append(ch.lost, i)
		if errors.Is(context.Cause(t.ctx), ErrLost) || !t.endedAt().Before(t.deadline()) {
			continue
		}
		if err := s.release(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	s.notify(ch)
	s.log.Info("left the shards", "released", ch.lost)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("failed to give up the shards' Leases (they expire after %s): %w", s.opts.LeaseDuration, err)
	}
	return nil
}

// change is what a period did to the held shards.
type change struct{ acquired, lost []int }

// notify calls OnChange with ch, if anything changed.
func (s *Set) notify(ch change) {
	if s.opts.OnChange == nil || (len(ch.acquired) == 0 && len(ch.lost) == 0) {
		return
	}
	slices.Sort(ch.acquired)
	slices.Sort(ch.lost)
	s.opts.OnChange(ch.acquired, ch.lost)
}

func sortedKeys(m map[int]*tenure) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// holderOf is the Lease's holder ("" when free).
func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// observation is when this replica last saw a Lease change (a new resourceVersion), by
// its own clock: a Lease expires LeaseDurationSeconds after that, whatever the clocks of
// the other replicas said in its renewTime.
type observation struct {
	resourceVersion string
	at              time.Time
}

package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// loopState is what Run's loop remembers between periods.
type loopState struct {
	// observed is when each Lease was last seen to change.
	observed map[string]observation
	// looked says a period has read the Leases before: the first read only announces.
	looked bool
	// member is this replica's membership Lease as last written (nil: to be read).
	member *coordinationv1.Lease
	// memberRenewed is when the last successful write of the membership Lease was sent.
	memberRenewed time.Time
	// mixed is the replica last reported to divide into another number of shards.
	mixed string
}

// period is one turn of Run's loop: renew, look, then acquire or release. Until a
// period has read the Leases once, it only announces this replica and looks: replicas
// started together see each other before any takes shards, rather than the first
// taking all and giving most back. With one shard there is no spread to even (the
// first to write its Lease holds it, the others wait), so it is taken at the first
// look, without waiting a RetryPeriod to start (the controller's default).
func (s *Set) period(ctx context.Context) {
	if s.hooks.period != nil {
		s.hooks.period()
	}
	var ch change
	s.renewMember(ctx)
	s.renewShards(ctx, &ch)
	leases, err := s.list(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Error(err, "failed to read the shards' Leases")
		}
	case ctx.Err() == nil:
		v := s.see(leases)
		s.checkHeld(v, &ch)
		s.forgetDead(ctx, v)
		if s.loop.looked || s.opts.Shards == 1 {
			s.balance(ctx, v, &ch)
		}
		s.loop.looked = true
	}
	s.notify(ch)
}

// renewMember writes this replica's membership Lease with a new renewTime.
func (s *Set) renewMember(ctx context.Context) {
	sent := s.clock.Now()
	l := s.loop.member
	if l == nil {
		got, err := s.get(ctx, s.memberName)
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: s.memberName}}
		case err != nil:
			if ctx.Err() == nil {
				s.log.Error(err, "failed to read the membership Lease", "lease", s.memberName)
			}
			return
		default:
			l = got
		}
	}
	l = l.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[shardsAnnotation] = strconv.Itoa(s.opts.Shards)
	l.Spec.HolderIdentity = ptr.To(s.opts.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(s.opts.leaseSeconds())
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = l.Spec.RenewTime
	}
	var got *coordinationv1.Lease
	var err error
	if l.ResourceVersion == "" {
		got, err = s.create(ctx, l)
	} else {
		got, err = s.update(ctx, l)
	}
	if err != nil {
		s.loop.member = nil
		if ctx.Err() == nil {
			s.log.Error(err, "failed to renew the membership Lease", "lease", s.memberName)
		}
		return
	}
	s.loop.member, s.loop.memberRenewed = got, sent
}

// renewShards renews the Lease of every held shard and drops the tenures that ended.
func (s *Set) renewShards(ctx context.Context, ch *change) {
	s.mu.Lock()
	tenures := make(map[int]*tenure, len(s.tenures))
	for i, t := range s.tenures {
		tenures[i] = t
	}
	s.mu.Unlock()
	for _, i := range sortedKeys(tenures) {
		t := tenures[i]
		s.renew(ctx, t)
		// A tenure ended because Run is ending stays for leave to release its Lease.
		if !t.live() && !errors.Is(context.Cause(t.ctx), ErrReleased) {
			s.drop(t, ch)
		}
	}
}

// renew writes t's Lease with a new renewTime, unless t has passed its deadline by
// this replica's own clock: a Lease that other replicas may already have taken is
// never written again, even if the write would only fail on its resourceVersion.
func (s *Set) renew(ctx context.Context, t *tenure) {
	if !t.live() {
		return
	}
	sent := s.clock.Now()
	l := t.lease.DeepCopy()
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(sent))
	l.Spec.LeaseDurationSeconds = ptr.To(s.opts.leaseSeconds())
	got, err := s.update(ctx, l)
	switch {
	case err == nil:
		t.renew(sent, got)
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		// Someone else wrote or deleted the Lease since this replica last did: the
		// shard is theirs now, whatever the clock says.
		t.end(ErrLost)
	case ctx.Err() == nil:
		s.log.Error(err, "failed to renew a shard's Lease", "shard", t.shard, "left", t.deadline().Sub(sent).String())
	}
}

// drop removes the ended tenure t and reports its shard lost.
func (s *Set) drop(t *tenure, ch *change) {
	s.mu.Lock()
	if s.tenures[t.shard] == t {
		delete(s.tenures, t.shard)
	}
	s.mu.Unlock()
	ch.lost = append(ch.lost, t.shard)
	s.log.Info("lost a shard", "shard", t.shard, "cause", fmt.Sprint(context.Cause(t.ctx)))
}

// view is what one read of the Leases shows this replica.
type view struct {
	// shards are the Leases of the shards, by shard (missing: no Lease yet).
	shards map[int]*coordinationv1.Lease
	// takeable are the shards this replica may acquire: without a Lease, released or
	// expired. A Lease still recorded as this replica's own after it lost the shard by
	// its clock (after a pause) is not takeable before it expires, as for any other
	// replica: the shard is not written for again until then.
	takeable []int
	// held counts the shards each other live holder holds.
	held map[string]int
	// members are the live replicas' identities, this one included.
	members []string
	// mixed is a live replica that divides into another number of shards ("" if none).
	mixed string
	// dead are the expired membership Leases of other replicas.
	dead []*coordinationv1.Lease
}

// see reads the listed Leases into a view, noting which changed since the last look.
func (s *Set) see(leases []coordinationv1.Lease) view {
	now := s.clock.Now()
	v := view{shards: map[int]*coordinationv1.Lease{}, held: map[string]int{}}
	seen := make(map[string]bool, len(leases))
	for k := range leases {
		l := &leases[k]
		seen[l.Name] = true
		if o, ok := s.loop.observed[l.Name]; !ok || o.resourceVersion != l.ResourceVersion {
			s.loop.observed[l.Name] = observation{resourceVersion: l.ResourceVersion, at: now}
		}
		if i, ok := s.shardOf(l.Name); ok {
			v.shards[i] = l
			continue
		}
		id := holderOf(l)
		if !strings.HasPrefix(l.Name, memberPrefix) || l.Name == s.memberName || id == "" || id == s.opts.Identity {
			continue
		}
		if s.expired(l, now) {
			v.dead = append(v.dead, l)
			continue
		}
		v.members = append(v.members, id)
		if l.Annotations[shardsAnnotation] != strconv.Itoa(s.opts.Shards) {
			v.mixed = id
		}
	}
	for name := range s.loop.observed {
		if !seen[name] {
			delete(s.loop.observed, name)
		}
	}
	v.members = append(v.members, s.opts.Identity)
	for i := range s.opts.Shards {
		if _, ok := s.current(i); ok {
			continue
		}
		l := v.shards[i]
		if l == nil || holderOf(l) == "" || s.expired(l, now) {
			v.takeable = append(v.takeable, i)
		} else {
			v.held[holderOf(l)]++
		}
	}
	return v
}

// shardOf is the shard whose Lease is named name, if it is one of this Set's.
func (s *Set) shardOf(name string) (int, bool) {
	i, err := strconv.Atoi(strings.TrimPrefix(name, shardPrefix))
	if err != nil || i < 0 || i >= s.opts.Shards || LeaseName(i) != name {
		return 0, false
	}
	return i, true
}

// expired says whether l went unchanged for its lease duration since this replica
// first saw its current version.
func (s *Set) expired(l *coordinationv1.Lease, now time.Time) bool {
	d := s.opts.LeaseDuration
	if secs := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); secs > 0 {
		d = time.Duration(secs) * time.Second
	}
	return !now.Before(s.loop.observed[l.Name].at.Add(d))
}

// checkHeld ends the tenures whose Lease the read shows gone or held by another: a
// Lease written behind this replica's back (by hand) is not renewed over.
func (s *Set) checkHeld(v view, ch *change) {
	for _, i := range s.Held() {
		if l := v.shards[i]; l == nil || holderOf(l) != s.opts.Identity {
			t, _ := s.current(i)
			if t != nil {
				t.end(ErrLost)
				s.drop(t, ch)
			}
		}
	}
}

// forgetDead deletes the membership Leases of replicas gone for a lease duration, so
// that replicas that came and went (each pod has its own identity) leave nothing
// behind; the resourceVersion precondition spares one that came back meanwhile.
func (s *Set) forgetDead(ctx context.Context, v view) {
	for _, l := range v.dead {
		err := s.delete(ctx, l.Name, &l.ResourceVersion)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.log.Error(err, "failed to delete the membership Lease of a replica gone", "lease", l.Name)
		}
	}
}

// balance acquires shards up to this replica's share, or releases one above it.
//
// With n shards over r live replicas, an even spread gives each n/r or n/r+1 shards
// (base and fair below). A replica below base takes takeable shards up to base; one
// below fair takes up to fair only when no other replica holds fewer than it, so that
// a shard given up goes to the replica that needs it most. A replica gives one shard up
// per period, and only when no shard is takeable (the others are still taking), it
// holds at least two more than the replica holding fewest, that one holds fewer than
// fair, and it holds the most (ties to the lowest identity): of replicas that see the
// same Leases, exactly one gives up a shard, and only when that evens the spread.
func (s *Set) balance(ctx context.Context, v view, ch *change) {
	if v.mixed != "" {
		if s.loop.mixed != v.mixed {
			s.log.Info("not taking or giving up shards while a live replica divides the instances into another number of shards",
				"replica", v.mixed, "shards", s.opts.Shards)
		}
		s.loop.mixed = v.mixed
		return
	}
	s.loop.mixed = ""
	mine := len(s.Held())
	n, r := s.opts.Shards, len(v.members)
	base := n / r
	fair := base
	if n%r != 0 {
		fair++
	}
	poorest, richest, most := mine, s.opts.Identity, mine
	for _, m := range v.members {
		if m == s.opts.Identity {
			continue
		}
		c := v.held[m]
		poorest = min(poorest, c)
		if c > most || (c == most && m < richest) {
			richest, most = m, c
		}
	}
	want := 0
	switch {
	case mine < base:
		want = base - mine
	case mine < fair && poorest >= mine:
		want = fair - mine
	}
	if want > 0 {
		// A replica whose own membership is stale is not counted by the others:
		// taking shards then would overshoot the spread they compute.
		if s.clock.Since(s.loop.memberRenewed) >= s.opts.RenewDeadline {
			return
		}
		for _, i := range s.takeOrder(v.takeable) {
			if want == 0 {
				return
			}
			if s.acquire(ctx, i, v.shards[i], ch) {
				want--
			}
		}
		return
	}
	if len(v.takeable) == 0 && mine-poorest >= 2 && poorest < fair && richest == s.opts.Identity {
		held := s.Held()
		s.giveUp(ctx, held[len(held)-1], ch)
	}
}

// takeOrder orders the takeable shards starting from one that depends on this
// replica's identity, so that replicas starting together mostly try different shards.
func (s *Set) takeOrder(takeable []int) []int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s.opts.Identity))
	start := int(h.Sum32() % uint32(s.opts.Shards))
	order := slices.Clone(takeable)
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare((a-start+s.opts.Shards)%s.opts.Shards, (b-start+s.opts.Shards)%s.opts.Shards)
	})
	return order
}

// acquire writes this replica into shard i's Lease (cur, nil when there is none yet)
// and, when the write went through, starts a tenure. The resourceVersion of cur makes
// the write fail if any other replica wrote the Lease since this one read it.
func (s *Set) acquire(ctx context.Context, i int, cur *coordinationv1.Lease, ch *change) bool {
	sent := s.clock.Now()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.Namespace, Name: LeaseName(i)},
		Spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](0)}}
	if cur != nil {
		l = cur.DeepCopy()
		if holderOf(cur) != s.opts.Identity {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		}
	}
	l.Spec.HolderIdentity = ptr.To(s.opts.Identity)
	l.Spec.LeaseDurationSeconds = ptr.To(s.opts.leaseSeconds())
	l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(sent))
	l.Spec.RenewTime = l.Spec.AcquireTime
	var got *coordinationv1.Lease
	var err error
	if cur == nil {
		got, err = s.create(ctx, l)
	} else {
		got, err = s.update(ctx, l)
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		s.log.V(1).Info("another replica took the shard first", "shard", i)
		return false
	case err != nil:
		if ctx.Err() == nil {
			s.log.Error(err, "failed to acquire a shard's Lease", "shard", i)
		}
		return false
	}
	t := newTenure(ctx, s.clock, s.opts.RenewDeadline, i, got, sent)
	if s.hooks.tenure != nil {
		s.hooks.tenure(t)
	}
	s.mu.Lock()
	s.tenures[i] = t
	s.mu.Unlock()
	if ctx.Err() != nil {
		// Run is ending and endAll may have run before t was added: leave releases it.
		t.end(ErrReleased)
	}
	go t.watch()
	ch.acquired = append(ch.acquired, i)
	s.log.Info("acquired a shard", "shard", i)
	return true
}

// giveUp releases shard i to even out the spread: its context ends first, then its
// Lease is freed for another replica to take at once.
func (s *Set) giveUp(ctx context.Context, i int, ch *change) {
	t, ok := s.current(i)
	if !ok {
		return
	}
	t.end(ErrReleased)
	s.mu.Lock()
	delete(s.tenures, i)
	s.mu.Unlock()
	ch.lost = append(ch.lost, i)
	if err := s.release(ctx, t); err != nil {
		s.log.Error(err, "failed to release a shard's Lease (it expires instead)", "shard", i)
		return
	}
	s.log.Info("released a shard to even out the spread", "shard", i)
}

// release frees the ended tenure t's Lease: no holder, so that another replica takes it
// without waiting for it to expire.
func (s *Set) release(ctx context.Context, t *tenure) error {
	l := t.lease.DeepCopy()
	l.Spec.HolderIdentity = nil
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(s.clock.Now()))
	if _, err := s.update(ctx, l); err != nil {
		return fmt.Errorf("failed to release Lease %s/%s: %w", s.opts.Namespace, l.Name, err)
	}
	return nil
}

// deleteMember deletes this replica's membership Lease.
func (s *Set) deleteMember(ctx context.Context) error {
	err := s.delete(ctx, s.memberName, nil)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete membership Lease %s/%s: %w", s.opts.Namespace, s.memberName, err)
	}
	return nil
}

// The API calls, each bounded by half of RenewDeadline: long enough for a slow API
// server, short enough that one hung call leaves time to retry before the deadline.

func (s *Set) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.RenewDeadline/2)
}

func (s *Set) beforeWrite(name string) {
	if s.hooks.write != nil {
		s.hooks.write(name)
	}
}

func (s *Set) get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.leases.Get(ctx, name, metav1.GetOptions{})
}

func (s *Set) list(ctx context.Context) ([]coordinationv1.Lease, error) {
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	l, err := s.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (s *Set) create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.beforeWrite(l.Name)
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.leases.Create(ctx, l, metav1.CreateOptions{})
}

func (s *Set) update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s.beforeWrite(l.Name)
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.leases.Update(ctx, l, metav1.UpdateOptions{})
}

func (s *Set) delete(ctx context.Context, name string, resourceVersion *string) error {
	s.beforeWrite(name)
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	var pre *metav1.Preconditions
	if resourceVersion != nil {
		pre = &metav1.Preconditions{ResourceVersion: resourceVersion}
	}
	return s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre})
}

package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
)

const testNamespace = "cairn-system"

// Short timings for tests on a fake API (a Lease records whole seconds). The deadline
// leaves 1.4 s for a renewal, so that a test binary starved of CPU beside others (go
// test ./... on two cores) does not lose its shards where a test wants them kept.
const (
	testLease    = 2 * time.Second
	testDeadline = 1500 * time.Millisecond
	testRetry    = 100 * time.Millisecond
)

func fastOptions(identity string, shards int) Options {
	return Options{Namespace: testNamespace, Identity: identity, Shards: shards,
		LeaseDuration: testLease, RenewDeadline: testDeadline, RetryPeriod: testRetry}
}

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// fakeAPI is client-go's fake clientset with what it lacks of a real API server for
// Leases: every write gets a new resourceVersion, and an update or a delete with a
// stale one fails with a Conflict. It also records every write with who made it.
type fakeAPI struct {
	*fake.Clientset
	mu sync.Mutex // serialises the writes, as etcd does
	rv int

	writesMu sync.Mutex
	writes   []write
}

// write is one Lease write by a replica: when it was sent and answered, and its error.
type write struct {
	by, verb, lease string
	sent, answered  time.Time
	err             error
}

func newFakeAPI() *fakeAPI {
	a := &fakeAPI{Clientset: fake.NewClientset()}
	a.PrependReactor("create", "leases", a.create)
	a.PrependReactor("update", "leases", a.update)
	a.PrependReactor("delete", "leases", a.delete)
	return a
}

func (a *fakeAPI) create(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
	a.rv++
	l.ResourceVersion = strconv.Itoa(a.rv)
	if err := a.Tracker().Create(leasesResource, l, l.Namespace); err != nil {
		return true, nil, err
	}
	return true, l.DeepCopy(), nil
}

func (a *fakeAPI) update(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
	cur, err := a.Tracker().Get(leasesResource, l.Namespace, l.Name)
	if err != nil {
		return true, nil, err
	}
	if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
		return true, nil, apierrors.NewConflict(leasesResource.GroupResource(), l.Name, errors.New("the object has been modified"))
	}
	a.rv++
	l.ResourceVersion = strconv.Itoa(a.rv)
	if err := a.Tracker().Update(leasesResource, l, l.Namespace); err != nil {
		return true, nil, err
	}
	return true, l.DeepCopy(), nil
}

func (a *fakeAPI) delete(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := action.(k8stesting.DeleteAction)
	cur, err := a.Tracker().Get(leasesResource, d.GetNamespace(), d.GetName())
	if err != nil {
		return true, nil, err
	}
	if pre := d.GetDeleteOptions().Preconditions; pre != nil && pre.ResourceVersion != nil &&
		*pre.ResourceVersion != cur.(*coordinationv1.Lease).ResourceVersion {
		return true, nil, apierrors.NewConflict(leasesResource.GroupResource(), d.GetName(), errors.New("precondition failed"))
	}
	return true, nil, a.Tracker().Delete(leasesResource, d.GetNamespace(), d.GetName())
}

// as is the Lease client of the replica who: its writes are recorded under its name.
func (a *fakeAPI) as(who string) coordinationv1client.LeasesGetter {
	return replicaClient{a: a, who: who}
}

// lease reads a Lease (nil when there is none).
func (a *fakeAPI) lease(g Gomega, name string) *coordinationv1.Lease {
	l, err := a.CoordinationV1().Leases(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return l
}

// writesBy are the writes of who to the Lease named lease sent after since.
func (a *fakeAPI) writesBy(who, lease string, since time.Time) []write {
	a.writesMu.Lock()
	defer a.writesMu.Unlock()
	var ws []write
	for _, w := range a.writes {
		if w.by == who && w.lease == lease && w.sent.After(since) {
			ws = append(ws, w)
		}
	}
	return ws
}

// failedWritesBy are the writes of who that failed.
func (a *fakeAPI) failedWritesBy(who string) []write {
	a.writesMu.Lock()
	defer a.writesMu.Unlock()
	var ws []write
	for _, w := range a.writes {
		if w.by == who && w.err != nil {
			ws = append(ws, w)
		}
	}
	return ws
}

func (a *fakeAPI) record(w write) {
	w.answered = time.Now()
	a.writesMu.Lock()
	defer a.writesMu.Unlock()
	a.writes = append(a.writes, w)
}

type replicaClient struct {
	a   *fakeAPI
	who string
}

func (c replicaClient) Leases(namespace string) coordinationv1client.LeaseInterface {
	return recordingLeases{LeaseInterface: c.a.CoordinationV1().Leases(namespace), c: c}
}

// recordingLeases records the writes of one replica.
type recordingLeases struct {
	coordinationv1client.LeaseInterface
	c replicaClient
}

func (l recordingLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	sent := time.Now()
	got, err := l.LeaseInterface.Create(ctx, lease, opts)
	l.c.a.record(write{by: l.c.who, verb: "create", lease: lease.Name, sent: sent, err: err})
	return got, err
}

func (l recordingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	sent := time.Now()
	got, err := l.LeaseInterface.Update(ctx, lease, opts)
	l.c.a.record(write{by: l.c.who, verb: "update", lease: lease.Name, sent: sent, err: err})
	return got, err
}

func (l recordingLeases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	sent := time.Now()
	err := l.LeaseInterface.Delete(ctx, name, opts)
	l.c.a.record(write{by: l.c.who, verb: "delete", lease: name, sent: sent, err: err})
	return err
}

// group runs replicas against one fake API and keeps every tenure they begin, to check
// that no two replicas ever held one shard at once.
type group struct {
	t   *testing.T
	g   *WithT
	api *fakeAPI

	mu       sync.Mutex
	tenures  []heldBy
	replicas []*replica
	overlaps []string
}

type heldBy struct {
	id string
	t  *tenure
}

// replica is one running Set.
type replica struct {
	id     string
	set    *Set
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error

	mu     sync.Mutex
	events []change // what OnChange was told
}

func newGroup(t *testing.T) *group {
	gr := &group{t: t, g: NewWithT(t), api: newFakeAPI()}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go gr.watch(stop, watched)
	t.Cleanup(func() {
		for _, r := range gr.replicas {
			_ = r.stop()
		}
		close(stop)
		<-watched
		gr.checkNoOverlap()
	})
	return gr
}

// start runs a replica; adjust, when given, changes its Set before Run.
func (gr *group) start(id string, shards int, adjust ...func(*Set)) *replica {
	gr.t.Helper()
	r := &replica{id: id, done: make(chan error, 1)}
	opts := fastOptions(id, shards)
	opts.OnChange = func(acquired, lost []int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, change{acquired: acquired, lost: lost})
	}
	set, err := New(gr.api.as(id), opts)
	gr.g.Expect(err).NotTo(HaveOccurred())
	set.hooks.tenure = func(t *tenure) {
		gr.mu.Lock()
		defer gr.mu.Unlock()
		gr.tenures = append(gr.tenures, heldBy{id: id, t: t})
	}
	for _, f := range adjust {
		f(set)
	}
	r.set = set
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	gr.mu.Lock()
	gr.replicas = append(gr.replicas, r)
	gr.mu.Unlock()
	go func() { r.done <- set.Run(ctx) }()
	return r
}

// stop ends the replica's Run and returns its error.
func (r *replica) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// lostCount is how many shards OnChange reported lost.
func (r *replica) lostCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		n += len(e.lost)
	}
	return n
}

// heldByEvents is what OnChange's reports add up to.
func (r *replica) heldByEvents() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := map[int]bool{}
	for _, e := range r.events {
		for _, i := range e.lost {
			delete(held, i)
		}
		for _, i := range e.acquired {
			held[i] = true
		}
	}
	return slices.Sorted(maps.Keys(held))
}

// watch checks every 10 ms, as the replicas see it themselves, that no shard is held
// by two of them: a replica holds a shard from the moment its context is live. A shard
// two replicas report is an overlap when the first one's tenure, read before the
// second's, had not ended by the time the second one's began.
func (gr *group) watch(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		gr.mu.Lock()
		replicas := append([]*replica{}, gr.replicas...)
		gr.mu.Unlock()
		seen := map[int]heldBy{}
		for _, r := range replicas {
			for i := range r.set.Shards() {
				t, ok := r.set.current(i)
				if !ok {
					continue
				}
				if first, dup := seen[i]; dup && (first.t.live() || liveUntil(first.t).After(t.start)) {
					gr.overlap(fmt.Sprintf("shard %d held by %s and %s at once (sampled)", i, first.id, r.id))
				}
				seen[i] = heldBy{id: r.id, t: t}
			}
		}
	}
}

// tenureOf is the last tenure of shard i that replica id began.
func (gr *group) tenureOf(id string, i int) *tenure {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	var last *tenure
	for _, h := range gr.tenures {
		if h.id == id && h.t.shard == i {
			last = h.t
		}
	}
	return last
}

func (gr *group) overlap(msg string) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	gr.overlaps = append(gr.overlaps, msg)
}

// liveUntil is when t stopped being live: its cancellation or its deadline, whichever
// came first (now, if it is live).
func liveUntil(t *tenure) time.Time {
	end := t.endedAt()
	if end.IsZero() {
		if t.live() {
			return time.Now()
		}
		end = t.endedAt()
	}
	if d := t.deadline(); d.Before(end) {
		end = d
	}
	return end
}

// checkNoOverlap checks the sampled overlaps and that no two tenures of one shard by
// different replicas were live at the same time.
func (gr *group) checkNoOverlap() {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	overlaps := append([]string{}, gr.overlaps...)
	for i, a := range gr.tenures {
		for _, b := range gr.tenures[i+1:] {
			if a.id == b.id || a.t.shard != b.t.shard {
				continue
			}
			if a.t.start.Before(liveUntil(b.t)) && b.t.start.Before(liveUntil(a.t)) {
				overlaps = append(overlaps, fmt.Sprintf("shard %d: %s's tenure [%s, %s] and %s's [%s, %s] overlap",
					a.t.shard, a.id, a.t.start.Format("15:04:05.000"), liveUntil(a.t).Format("15:04:05.000"),
					b.id, b.t.start.Format("15:04:05.000"), liveUntil(b.t).Format("15:04:05.000")))
			}
		}
	}
	gr.g.Expect(overlaps).To(BeEmpty(), "no shard is ever held by two replicas")
}

// spread is how many shards each replica holds, in the replicas' order.
func (gr *group) spread(rs ...*replica) []int {
	var n []int
	for _, r := range rs {
		n = append(n, len(r.set.Held()))
	}
	return n
}

// holdersOf are the Leases' holders of shards 0..n-1 as the API has them.
func (gr *group) holders(n int) []string {
	var hs []string
	for i := range n {
		hs = append(hs, holderOf(gr.api.lease(gr.g, LeaseName(i))))
	}
	return hs
}

// keyIn is an instance name in shard i of n, in namespace "team".
func keyIn(i, n int) string {
	for k := 0; ; k++ {
		if name := fmt.Sprintf("app-%d", k); Of("team", name, n) == i {
			return name
		}
	}
}

// sortedDesc is n sorted from most to fewest.
func sortedDesc(n []int) []int {
	out := slices.Clone(n)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

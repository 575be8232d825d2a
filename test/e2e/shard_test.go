package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"cairn.dev/cairn/reconciler/shard"
	"cairn.dev/cairn/test/harness"
)

// Short shard timings for the e2e tests: a lease of 3 s, given up by the holder's own
// clock after 2 s without a renewal, renewed every 500 ms.
const (
	shardLease    = 3 * time.Second
	shardDeadline = 2 * time.Second
	shardRetry    = 500 * time.Millisecond
)

// TestShardsSpreadAndMoveBetweenReplicas: three replicas (a, b, c) share three shards
// on a real API server, one each. a stops: it releases its Lease and the others take
// its shard at once. c is cut off from the API server without releasing anything (as a
// replica that died or lost its network): its shard's context ends by its own clock,
// and b takes the shard once the lease has run out. At no moment do two replicas hold
// one shard.
func TestShardsSpreadAndMoveBetweenReplicas(t *testing.T) {
	hc := harness.ForTest(t)
	g := NewWithT(t)
	ns := hc.Namespace(t)
	a, b, c := startShardReplica(t, hc, ns, "a"), startShardReplica(t, hc, ns, "b"), startShardReplica(t, hc, ns, "c")
	all := []*shardReplica{a, b, c}
	overlaps := watchShardOverlaps(t, all)

	begin := time.Now()
	g.Eventually(func() [][]int { return heldBy(all) }, 15*time.Second, 10*time.Millisecond).
		Should(ConsistOf([]int{0}, []int{1}, []int{2}), "one shard each")
	t.Logf("three replicas converged in %s: a %v, b %v, c %v", time.Since(begin).Round(time.Millisecond),
		a.set.Held(), b.set.Held(), c.set.Held())
	for _, r := range all {
		g.Expect(leaseHolder(t, hc, ns, shard.LeaseName(r.set.Held()[0]))).To(Equal(r.id))
		g.Expect(leaseHolder(t, hc, ns, shard.MemberLeaseName(r.id))).To(Equal(r.id))
	}

	// a stops: its shard's context ends, its Lease is freed, and b or c takes it.
	aShard := a.set.Held()[0]
	aCtx, ok := a.set.Context("team", shardKey(aShard))
	g.Expect(ok).To(BeTrue())
	stopped := time.Now()
	g.Expect(a.stop()).To(Succeed())
	g.Expect(context.Cause(aCtx)).To(MatchError(shard.ErrReleased))
	g.Expect(leaseHolder(t, hc, ns, shard.MemberLeaseName("a"))).To(BeEmpty(), "a's membership Lease is gone")
	g.Eventually(func() []int { return slices.Concat(b.set.Held(), c.set.Held()) }, 5*time.Second, 10*time.Millisecond).
		Should(ConsistOf(0, 1, 2))
	took := time.Since(stopped)
	t.Logf("a released shard %d; taken over in %s", aShard, took.Round(time.Millisecond))
	g.Expect(took).To(BeNumerically("<", 2*shardRetry+500*time.Millisecond), "taken at once, not after the lease")
	g.Expect(leaseHolder(t, hc, ns, shard.LeaseName(aShard))).To(BeElementOf("b", "c"))

	// c is cut off without releasing anything.
	cShards := c.set.Held()
	g.Expect(cShards).NotTo(BeEmpty())
	cCtx, ok := c.set.Context("team", shardKey(cShards[0]))
	g.Expect(ok).To(BeTrue())
	var cEnded atomic.Pointer[time.Time]
	context.AfterFunc(cCtx, func() { cEnded.Store(ptr.To(time.Now())) })
	cut := time.Now()
	c.cut.Store(true)
	g.Eventually(cCtx.Done(), shardLease).Should(BeClosed())
	g.Eventually(cEnded.Load).ShouldNot(BeNil())
	lost := cEnded.Load().Sub(cut)
	t.Logf("c's shards %v ended by its own clock %s after the cut", cShards, lost.Round(time.Millisecond))
	g.Expect(context.Cause(cCtx)).To(MatchError(shard.ErrLost))
	// c renewed at most a retry period before the cut, and b can take the shard only a
	// lease after that renewal: c's context ends before, at RenewDeadline.
	g.Expect(lost).To(BeNumerically("<", shardLease-shardRetry), "by c's own clock, before the lease runs out")
	g.Eventually(b.set.Held, shardLease+4*shardRetry, 10*time.Millisecond).Should(Equal([]int{0, 1, 2}))
	took = time.Since(cut)
	t.Logf("b took c's shards %s after the cut", took.Round(time.Millisecond))
	g.Expect(took).To(BeNumerically(">=", shardLease-shardRetry), "not before c's lease ran out")
	g.Expect(took).To(BeNumerically("<", shardLease+4*shardRetry), "within the lease and a few retry periods")
	for _, i := range cShards {
		g.Expect(leaseHolder(t, hc, ns, shard.LeaseName(i))).To(Equal("b"))
	}
	err := c.stop()
	g.Expect(err).To(HaveOccurred(), "c could not delete its membership Lease: it is cut off")
	t.Logf("c's Run: %v", err)

	g.Expect(b.stop()).To(Succeed())
	for i := range 3 {
		g.Expect(leaseHolder(t, hc, ns, shard.LeaseName(i))).To(BeEmpty(), "b released shard %d", i)
	}
	g.Expect(overlaps()).To(BeEmpty(), "no shard was ever held by two replicas")
}

// shardReplica is one shard.Set whose requests can be cut off from the API server.
type shardReplica struct {
	id     string
	set    *shard.Set
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startShardReplica(t *testing.T, hc *harness.Cluster, ns, id string) *shardReplica {
	t.Helper()
	r := &shardReplica{id: id, done: make(chan error, 1)}
	cfg := rest.CopyConfig(hc.RESTConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return cuttableTransport{rt: rt, cut: &r.cut} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.set, err = shard.New(cs.CoordinationV1(), shard.Options{Namespace: ns, Identity: id, Shards: 3,
		LeaseDuration: shardLease, RenewDeadline: shardDeadline, RetryPeriod: shardRetry})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.set.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop ends the replica's Run and returns its error.
func (r *shardReplica) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// cuttableTransport fails every request once cut is set, as a network partition does.
type cuttableTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cuttableTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("cut off from the API server")
	}
	return c.rt.RoundTrip(req)
}

// heldBy is what each replica holds, in order.
func heldBy(rs []*shardReplica) [][]int {
	var held [][]int
	for _, r := range rs {
		held = append(held, r.set.Held())
	}
	return held
}

// shardKey is an instance name of namespace "team" in shard i of 3.
func shardKey(i int) string {
	for k := 0; ; k++ {
		if name := fmt.Sprintf("app-%d", k); shard.Of("team", name, 3) == i {
			return name
		}
	}
}

// watchShardOverlaps checks every 10 ms, as the replicas see it themselves, that no two
// hold one shard: a replica holds a shard while the shard's context is live. Two
// replicas both reporting one shard overlap when the context of the one read first is
// still live after the second was read. It returns the overlaps seen (after stopping).
func watchShardOverlaps(t *testing.T, rs []*shardReplica) func() []string {
	stop, done := make(chan struct{}), make(chan struct{})
	var overlaps []string
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for i := range 3 {
				var first *shardReplica
				var firstCtx context.Context
				for _, r := range rs {
					ctx, ok := r.set.Context("team", shardKey(i))
					if !ok {
						continue
					}
					if first != nil && firstCtx.Err() == nil {
						overlaps = append(overlaps, fmt.Sprintf("%s shard %d held by %s and %s",
							time.Now().Format("15:04:05.000"), i, first.id, r.id))
					}
					first, firstCtx = r, ctx
				}
			}
		}
	}()
	var once sync.Once
	finish := func() []string {
		once.Do(func() {
			close(stop)
			<-done
		})
		return overlaps
	}
	t.Cleanup(func() { finish() })
	return finish
}

// leaseHolder is the holder of the Lease ns/name ("" when free or missing).
func leaseHolder(t *testing.T, hc *harness.Cluster, ns, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(hc.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

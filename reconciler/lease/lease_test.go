package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// fastOptions are short leader-election timings for tests on a fake API.
func fastOptions(identity string) Options {
	return Options{Namespace: "cairn-system", Identity: identity, Wait: 2 * time.Second,
		LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

func holderOf(g *WithT, c *fake.Clientset) string {
	l, err := c.CoordinationV1().Leases("cairn-system").Get(context.Background(), Name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func TestHoldRunsFnAndReleases(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientset()
	ran := false
	err := hold(context.Background(), c.CoordinationV1(), fastOptions("a"), func(ctx context.Context) error {
		ran = true
		g.Expect(holderOf(g, c)).To(Equal("a"), "held while fn runs")
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ran).To(BeTrue())
	g.Expect(holderOf(g, c)).To(BeEmpty(), "released as soon as fn returns")
}

func TestHoldReturnsFnsError(t *testing.T) {
	g := NewWithT(t)
	boom := errors.New("boom")
	err := hold(context.Background(), fake.NewClientset().CoordinationV1(), fastOptions("a"),
		func(context.Context) error { return boom })
	g.Expect(err).To(MatchError(boom))
}

func TestSecondHolderGivesUpNamingTheFirst(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientset()
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- hold(context.Background(), c.CoordinationV1(), fastOptions("first"), func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	opts := fastOptions("second")
	opts.Wait = 500 * time.Millisecond
	began := time.Now()
	err := hold(context.Background(), c.CoordinationV1(), opts, func(context.Context) error {
		t.Error("the second holder must not run while the first holds the Lease")
		return nil
	})
	var held *HeldError
	g.Expect(errors.As(err, &held)).To(BeTrue(), "%v", err)
	g.Expect(held.Holder).To(Equal("first"))
	g.Expect(err.Error()).To(ContainSubstring("holder first"))
	g.Expect(time.Since(began)).To(BeNumerically("<", 5*time.Second), "bounded by Wait")
	close(release)
	g.Expect(<-first).To(Succeed())
}

func TestStaleLeaseIsTakenOver(t *testing.T) {
	g := NewWithT(t)
	old := metav1.NewMicroTime(time.Now().Add(-time.Hour))
	c := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cairn-system", Name: Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), LeaseDurationSeconds: ptr.To[int32](1),
			AcquireTime: &old, RenewTime: &old},
	})
	ran := false
	err := hold(context.Background(), c.CoordinationV1(), fastOptions("alive"), func(context.Context) error {
		ran = true
		g.Expect(holderOf(g, c)).To(Equal("alive"))
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ran).To(BeTrue())
}

func TestLostLeaseCancelsFn(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientset()
	var failing atomic.Bool
	c.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("etcd is gone")
		}
		return false, nil, nil
	})
	err := hold(context.Background(), c.CoordinationV1(), fastOptions("a"), func(ctx context.Context) error {
		failing.Store(true) // every renewal fails from now on
		select {
		case <-ctx.Done():
			g.Expect(context.Cause(ctx)).To(MatchError(ErrLost))
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("fn was not cancelled when the Lease was lost")
		}
	})
	g.Expect(err).To(MatchError(ErrLost))
}

func TestCancelledWaitIsNotAHeldError(t *testing.T) {
	g := NewWithT(t)
	c := fake.NewClientset()
	inside, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = hold(context.Background(), c.CoordinationV1(), fastOptions("first"), func(context.Context) error {
			close(inside)
			<-release
			return nil
		})
	}()
	defer close(release)
	<-inside
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := hold(ctx, c.CoordinationV1(), fastOptions("second"), func(context.Context) error { return nil })
	var held *HeldError
	g.Expect(errors.As(err, &held)).To(BeFalse(), "%v", err)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
}

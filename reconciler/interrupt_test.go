package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

func TestInterruptedIsACancellationNotADeadline(t *testing.T) {
	stopped := errors.New("terminated signal received")
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(stopped)
	expired, cancel2 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel2()
	<-expired.Done()
	for _, tc := range []struct {
		name        string
		ctx         context.Context
		interrupted bool
	}{
		{"live", context.Background(), false},
		{"cancelled", cancelled, true},
		{"deadline passed", expired, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(interrupted(tc.ctx)).To(Equal(tc.interrupted))
			fctx, done := apply.Finishing(tc.ctx)
			defer done()
			g.Expect(fctx.Err()).NotTo(HaveOccurred(), "the outcome can still be written")
			if tc.ctx.Err() != nil {
				deadline, ok := fctx.Deadline()
				g.Expect(ok).To(BeTrue())
				g.Expect(time.Until(deadline)).To(BeNumerically("<=", apply.FinishTimeout))
			}
			r := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{}}, failure: outcome.NewStalled(cairnv1.ReasonHealthCheckFailed, tc.ctx.Err())}
			r.mi.Namespace, r.mi.Name = "team-a", "web"
			r.interrupt(tc.ctx)
			if !tc.interrupted {
				g.Expect(r.failure.Reason).To(Equal(cairnv1.ReasonHealthCheckFailed))
				return
			}
			g.Expect(r.failure.Kind).To(Equal(outcome.Transient))
			g.Expect(r.failure.Reason).To(Equal(cairnv1.ReasonInterrupted))
			g.Expect(r.failure.Error()).To(ContainSubstring("team-a/web was interrupted (terminated signal received)"))
		})
	}
}

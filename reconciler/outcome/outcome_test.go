package outcome

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestClassifyChoosesTheKindFromTheError(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	terminating := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}
	waitingAlready := NewWaiting("DependencyNotReady", errors.New("dependency a/b is not ready"))
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"a deadline", fmt.Errorf("apply: %w", context.DeadlineExceeded), Transient},
		{"a conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), Transient},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), Transient},
		{"an API server failing", apierrors.NewInternalError(errors.New("etcd")), Transient},
		{"unavailable", apierrors.NewServiceUnavailable("down"), Transient},
		{"a refused connection", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, Transient},
		{"a closed connection", fmt.Errorf("read: %w", net.ErrClosed), Transient},
		{"a namespace being deleted", terminating, Transient},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), Stalled},
		{"invalid", apierrors.NewBadRequest("bad field"), Stalled},
		{"anything else", errors.New("template: bad"), Stalled},
		{"a failure keeps its kind", fmt.Errorf("wrapped: %w", waitingAlready), Waiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := Classify("ApplyFailed", tc.err)
			g.Expect(f.Kind).To(Equal(tc.want))
			g.Expect(IsTransient(tc.err)).To(Equal(tc.want == Transient))
			if tc.want != Waiting {
				g.Expect(f.Reason).To(Equal("ApplyFailed"))
				g.Expect(errors.Is(f, tc.err)).To(BeTrue(), "the failure wraps the error")
			} else {
				g.Expect(f).To(BeIdenticalTo(waitingAlready), "a failure is not wrapped twice")
			}
		})
	}
}

func TestFailureReadsAsItsError(t *testing.T) {
	g := NewWithT(t)
	f := Failuref(Stalled, "RenderFailed", "values.yaml:%d: %s", 3, "bad")
	g.Expect(f.Error()).To(Equal("values.yaml:3: bad"))
	g.Expect(NewTransient("X", f).Unwrap()).To(BeIdenticalTo(f))
	g.Expect(NewStalled("X", f).Kind).To(Equal(Stalled))
}

package apply

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// deployment is Deployment team-a/web as the API server returns it, of generation 1,
// with the status a controller would write: state is "current" (rolled out and
// available), "progressing" (one of two replicas updated), "stale" (the controller
// has not seen generation 1 yet) or "failed" (its progress deadline passed).
func deployment(state string) *unstructured.Unstructured {
	status := map[string]any{"observedGeneration": int64(1), "replicas": int64(2), "updatedReplicas": int64(2),
		"readyReplicas": int64(2), "availableReplicas": int64(2),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
		}}
	switch state {
	case "progressing":
		status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"] = int64(1), int64(1), int64(1)
	case "stale":
		status["observedGeneration"] = int64(0)
	case "failed":
		status["conditions"] = []any{
			map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"},
			map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": "ReplicaSet \"web-1\" has timed out progressing."},
		}
	}
	u := obj("apps/v1", "Deployment", "team-a", "web", map[string]any{
		"spec":   map[string]any{"replicas": int64(2)},
		"status": status,
	})
	u.SetGeneration(1)
	return u
}

// finishedJob is Job team-a/migrate whose condition cond (Complete, Failed) is True.
func finishedJob(cond string) *unstructured.Unstructured {
	return job(map[string]any{"conditions": []any{map[string]any{"type": cond, "status": "True"}}})
}

// TestHealthOfLiveObjects: kstatus read from the objects as the API server returns
// them: Current, not Current (in progress), or Failed with the controller's message.
func TestHealthOfLiveObjects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		u       *unstructured.Unstructured
		current bool
		failed  string
	}{
		{"a ConfigMap is Current once it exists", configMap("team-a", "c", nil), true, ""},
		{"a rolled out Deployment", deployment("current"), true, ""},
		{"a Deployment rolling out", deployment("progressing"), false, ""},
		{"a Deployment its controller has not seen", deployment("stale"), false, ""},
		{"a Deployment past its progress deadline", deployment("failed"), false, "Deployment/team-a/web: Progress deadline exceeded"},
		{"a finished Job", finishedJob("Complete"), true, ""},
		{"a failed Job", finishedJob("Failed"), false, "Job/team-a/migrate: Job Failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objects := []*unstructured.Unstructured{tc.u}
			if tc.current {
				g.Expect(NotCurrent(objects)).To(BeEmpty())
			} else {
				g.Expect(NotCurrent(objects)).To(Equal(objects))
			}
			if tc.failed == "" {
				g.Expect(failedObjects(objects)).To(BeEmpty())
			} else {
				g.Expect(failedObjects(objects)).To(ConsistOf(HavePrefix(tc.failed)))
			}
		})
	}
}

// countingClient is a fake client holding objects that counts its GETs.
func countingClient(gets *atomic.Int32, objects ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
}

// TestWaitHealthy: the objects handed in are the apply's responses; those Current
// cost no request, the others are read until Current, Failed or the wait ends.
func TestWaitHealthy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		applied  *unstructured.Unstructured // the apply's response
		live     *unstructured.Unstructured // in the cluster; nil: gone
		wait     time.Duration
		wantGets bool
		check    func(g *WithT, err error)
	}{
		{name: "Current in the response: no request", applied: configMap("team-a", "c", nil), live: configMap("team-a", "c", nil),
			wait: time.Second, check: func(g *WithT, err error) { g.Expect(err).NotTo(HaveOccurred()) }},
		{name: "in progress, then Current when read", applied: deployment("stale"), live: deployment("current"), wait: 5 * time.Second,
			wantGets: true, check: func(g *WithT, err error) { g.Expect(err).NotTo(HaveOccurred()) }},
		{name: "still in progress when the wait ends", applied: deployment("stale"), live: deployment("progressing"),
			wait: 300 * time.Millisecond, wantGets: true, check: func(g *WithT, err error) {
				var nc *NotCurrentError
				g.Expect(errors.As(err, &nc)).To(BeTrue())
				g.Expect(nc.After).To(Equal(300 * time.Millisecond))
				g.Expect(nc.Pending).To(HaveLen(1))
				g.Expect(err).To(MatchError(ContainSubstring("Deployment/team-a/web (InProgress: ")))
			}},
		{name: "Failed when read", applied: deployment("stale"), live: deployment("failed"), wait: 5 * time.Second,
			wantGets: true, check: func(g *WithT, err error) {
				var f *outcome.Failure
				g.Expect(errors.As(err, &f)).To(BeTrue())
				g.Expect(f.Kind).To(Equal(outcome.Stalled))
				g.Expect(f.Reason).To(Equal(cairnv1.ReasonHealthCheckFailed))
				g.Expect(err).To(MatchError(ContainSubstring("health check failed: Deployment/team-a/web: Progress deadline exceeded")))
			}},
		{name: "Failed in the response: no request", applied: deployment("failed"), live: deployment("failed"), wait: 5 * time.Second,
			check: func(g *WithT, err error) {
				g.Expect(err).To(MatchError(ContainSubstring("health check failed")))
			}},
		{name: "gone when read", applied: deployment("stale"), wait: 5 * time.Second, wantGets: true,
			check: func(g *WithT, err error) {
				g.Expect(err).To(MatchError(ContainSubstring("Deployment/team-a/web: failed to read for the health check")))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var gets atomic.Int32
			var objects []client.Object
			if tc.live != nil {
				objects = append(objects, tc.live)
			}
			c := countingClient(&gets, objects...)

			err := WaitHealthy(context.Background(), c, []*unstructured.Unstructured{tc.applied}, tc.wait)

			tc.check(g, err)
			g.Expect(gets.Load() > 0).To(Equal(tc.wantGets))
		})
	}
}

// TestGetExistingAndNotAmong: a recheck reads the rendered objects the sync did not
// apply, leaving out those that are gone.
func TestGetExistingAndNotAmong(t *testing.T) {
	g := NewWithT(t)
	a, b, gone := configMap("team-a", "a", nil), configMap("team-a", "b", nil), configMap("team-a", "gone", nil)
	g.Expect(NotAmong([]*unstructured.Unstructured{a, b, gone}, []*unstructured.Unstructured{configMap("team-a", "b", nil)})).
		To(Equal([]*unstructured.Unstructured{a, gone}))

	var gets atomic.Int32
	c := countingClient(&gets, a.DeepCopy(), b.DeepCopy())
	live, err := GetExisting(context.Background(), c, []*unstructured.Unstructured{a, gone})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live).To(HaveLen(1))
	g.Expect(Describe(live[0])).To(Equal("ConfigMap/team-a/a"))
	g.Expect(live[0].GetResourceVersion()).NotTo(BeEmpty(), "read from the cluster")
}

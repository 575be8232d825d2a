package apply

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

			err := WaitHealthy(context.Background(), c, nil, []*unstructured.Unstructured{tc.applied}, tc.wait)

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

// TestCheckHealth: the health phase of one instance as a function of the prior
// Healthy condition, the apply's answers, the render and the cluster, returning the
// condition it records and the instance's failure.
func TestCheckHealth(t *testing.T) {
	progressing := func(since time.Time) *metav1.Condition {
		return &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionUnknown, Reason: cairnv1.ReasonProgressing,
			Message: "applied; waiting", LastTransitionTime: metav1.NewTime(since)}
	}
	healthy := &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionTrue, Reason: cairnv1.ReasonSucceeded}
	for _, tc := range []struct {
		name    string
		check   HealthCheck
		live    []client.Object // in the cluster
		ctx     func() context.Context
		status  metav1.ConditionStatus // Healthy after the check; "" when it is left alone
		message string
		renew   bool
		kind    outcome.Kind // of the failure; "" for none
		reason  string
		gets    bool
		waited  bool
	}{
		{name: "nothing applied and healthy before: no request, no wait",
			check:  HealthCheck{Prior: healthy, Rendered: []*unstructured.Unstructured{deployment("current")}, Timeout: time.Minute},
			status: metav1.ConditionTrue, message: "no object changed; each was Current when last applied"},
		{name: "applied objects Current in their answers: no request",
			check:  HealthCheck{Applied: []*unstructured.Unstructured{configMap("team-a", "c", nil), deployment("current")}, Timeout: time.Minute},
			status: metav1.ConditionTrue, message: "2 applied object(s) are Current", renew: true, waited: true},
		{name: "applied, then Current when read",
			check: HealthCheck{Applied: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Minute},
			live:  []client.Object{deployment("current")}, status: metav1.ConditionTrue, message: "1 applied object(s) are Current",
			renew: true, gets: true, waited: true},
		{name: "still rolling out when the sync's share of the wait ends: handed over as Progressing",
			check: HealthCheck{Applied: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Minute, HandOver: 200 * time.Millisecond},
			live:  []client.Object{deployment("progressing")}, status: metav1.ConditionUnknown, message: "applied; waiting for 1 of 1 object(s) to be Current (rechecked until ",
			renew: true, kind: outcome.Progressing, reason: cairnv1.ReasonProgressing, gets: true, waited: true},
		{name: "still rolling out when the timeout passes: HealthCheckFailed, transient",
			check: HealthCheck{Applied: []*unstructured.Unstructured{deployment("stale")}, Timeout: 200 * time.Millisecond},
			live:  []client.Object{deployment("progressing")}, status: metav1.ConditionFalse, message: "health check timed out after 200ms: Deployment/team-a/web",
			renew: true, kind: outcome.Transient, reason: cairnv1.ReasonHealthCheckFailed, gets: true, waited: true},
		{name: "past its progress deadline: HealthCheckFailed, stalled",
			check:  HealthCheck{Applied: []*unstructured.Unstructured{deployment("failed")}, Timeout: time.Minute},
			status: metav1.ConditionFalse, message: "health check failed: Deployment/team-a/web: Progress deadline exceeded",
			renew: true, kind: outcome.Stalled, reason: cairnv1.ReasonHealthCheckFailed, waited: true},
		{name: "a recheck of a handed-over wait reads the rendered objects, its clock from the apply",
			check: HealthCheck{Prior: progressing(time.Now().Add(-time.Minute)), Rendered: []*unstructured.Unstructured{deployment("stale")}, Timeout: 2 * time.Minute},
			live:  []client.Object{deployment("current")}, status: metav1.ConditionTrue, message: "1 applied object(s) are Current", gets: true, waited: true},
		{name: "a recheck past the timeout fails at once",
			check: HealthCheck{Prior: progressing(time.Now().Add(-time.Hour)), Rendered: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Minute},
			live:  []client.Object{deployment("progressing")}, status: metav1.ConditionFalse, message: "health check timed out after 1m0s",
			kind: outcome.Transient, reason: cairnv1.ReasonHealthCheckFailed, gets: true, waited: true},
		{name: "a failed check before: every rendered object is read again, a new wait",
			check: HealthCheck{Prior: &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionFalse, Reason: cairnv1.ReasonHealthCheckFailed},
				Rendered: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Minute},
			live: []client.Object{deployment("current")}, status: metav1.ConditionTrue, message: "1 applied object(s) are Current", renew: true, gets: true, waited: true},
		{name: "interrupted: Healthy stays Unknown, no failure of its own",
			check: HealthCheck{Applied: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Minute},
			live:  []client.Object{deployment("progressing")},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(150*time.Millisecond, cancel)
				return ctx
			},
			status: metav1.ConditionUnknown, message: "waiting for 1 object(s) to be Current", renew: true, gets: true, waited: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var gets atomic.Int32
			c := countingClient(&gets, tc.live...)
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			waited := false
			tc.check.OnWait = func() { waited = true }

			v := CheckHealth(ctx, c, tc.check)

			g.Expect(v.Renew).To(Equal(tc.renew))
			g.Expect(v.Interrupted).To(Equal(tc.ctx != nil))
			g.Expect(waited).To(Equal(tc.waited))
			g.Expect(gets.Load() > 0).To(Equal(tc.gets))
			if tc.kind == "" {
				g.Expect(v.Failure).To(BeNil())
			} else {
				g.Expect(v.Failure).NotTo(BeNil())
				g.Expect(v.Failure.Kind).To(Equal(tc.kind))
				g.Expect(v.Failure.Reason).To(Equal(tc.reason))
			}
			mi := &cairnv1.ModuleInstance{}
			if tc.check.Prior != nil {
				conditions.Set(mi, tc.check.Prior.DeepCopy())
			}
			v.Mark(mi)
			got := conditions.Get(mi, cairnv1.HealthyCondition)
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Status).To(Equal(tc.status))
			g.Expect(got.Message).To(HavePrefix(tc.message))
		})
	}
}

// TestCheckHealthKeepsTheClockOfARecheck: a wait handed over, then rechecked by
// later syncs that apply nothing, counts spec.timeout from the apply that started it,
// whatever the recheck's messages say (conditions.Set gives a condition whose message
// changes a new transition time, and each recheck sets the Waiting message and then
// the verdict's, naming what the objects report: an instance rechecked more often
// than its timeout never timed out); once that deadline has passed, the recheck fails.
func TestCheckHealthKeepsTheClockOfARecheck(t *testing.T) {
	g := NewWithT(t)
	mi := &cairnv1.ModuleInstance{}
	var gets atomic.Int32
	c := countingClient(&gets, deployment("progressing"))
	// The apply starts the wait, which is handed over.
	first := CheckHealth(context.Background(), c, HealthCheck{Applied: []*unstructured.Unstructured{deployment("stale")},
		Rendered: []*unstructured.Unstructured{deployment("stale")}, Timeout: time.Hour, HandOver: 150 * time.Millisecond})
	g.Expect(first.Renew).To(BeTrue())
	g.Expect(first.Failure.Kind).To(Equal(outcome.Progressing))
	first.Mark(mi)
	since := conditions.Get(mi, cairnv1.HealthyCondition).LastTransitionTime
	deadline := since.Add(time.Hour).UTC().Format(time.RFC3339)
	// Rechecks, each with a message of its own (what the Deployment reports changes).
	messages := map[string]bool{}
	for i, updated := range []int64{0, 1, 0} {
		time.Sleep(time.Second) // a new second: a new transition time would show
		rolling := deployment("progressing")
		g.Expect(unstructured.SetNestedField(rolling.Object, updated, "status", "updatedReplicas")).To(Succeed())
		g.Expect(c.Status().Update(context.Background(), rolling)).To(Succeed())
		v := CheckHealth(context.Background(), c, HealthCheck{
			Prior: conditions.Get(mi, cairnv1.HealthyCondition), Rendered: []*unstructured.Unstructured{deployment("stale")},
			Timeout: time.Hour, HandOver: 150 * time.Millisecond})
		g.Expect(v.Renew).To(BeFalse(), "recheck %d", i)
		g.Expect(v.Failure.Kind).To(Equal(outcome.Progressing), "recheck %d", i)
		g.Expect(v.Failure.Err.Error()).To(ContainSubstring("rechecked until "+deadline), "recheck %d", i)
		v.Mark(mi)
		got := conditions.Get(mi, cairnv1.HealthyCondition)
		g.Expect(got.Reason).To(Equal(cairnv1.ReasonProgressing))
		g.Expect(got.LastTransitionTime.Time).To(BeTemporally("==", since.Time), "recheck %d moved the clock", i)
		messages[got.Message] = true
	}
	g.Expect(messages).To(HaveLen(2), "the rechecks' messages follow the Deployment's status")
	// The same wait, an hour on: its deadline has passed, and the recheck fails.
	expired := conditions.Get(mi, cairnv1.HealthyCondition)
	expired.LastTransitionTime = metav1.NewTime(since.Add(-time.Hour))
	v := CheckHealth(context.Background(), c, HealthCheck{Prior: expired, Rendered: []*unstructured.Unstructured{deployment("stale")},
		Timeout: time.Hour, HandOver: 150 * time.Millisecond})
	g.Expect(v.Failure).NotTo(BeNil())
	g.Expect(v.Failure.Reason).To(Equal(cairnv1.ReasonHealthCheckFailed))
	g.Expect(v.Failure.Err.Error()).To(ContainSubstring("health check timed out after 1h0m0s"))
	g.Expect(v.Healthy.Status).To(Equal(metav1.ConditionFalse))
}

package reconciler

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestDue: when an instance reconcile on the controller's queue has work, and when
// it will have.
func TestDue(t *testing.T) {
	now := time.Now()
	attempted := func(edit func(mi *cairnv1.ModuleInstance)) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team", Generation: 2,
			Annotations: map[string]string{inputDigestAnnotation: "sha256:in"}}}
		mi.Status.ObservedGeneration, mi.Status.LastAttemptedInput = 2, "sha256:in"
		conditions.MarkTrue(mi, "Ready", cairnv1.ReasonSucceeded, "ok")
		if edit != nil {
			edit(mi)
		}
		return mi
	}
	failed := func(retryIn time.Duration) func(mi *cairnv1.ModuleInstance) {
		return func(mi *cairnv1.ModuleInstance) {
			conditions.MarkFalse(mi, "Ready", cairnv1.ReasonApplyFailed, "boom")
			mi.Status.NextRetryAt = &metav1.Time{Time: now.Add(retryIn)}
		}
	}
	for _, tc := range []struct {
		name  string
		mi    *cairnv1.ModuleInstance
		due   bool
		after time.Duration
	}{
		{"its input attempted and Ready", attempted(nil), false, 0},
		{"a new input", attempted(func(mi *cairnv1.ModuleInstance) { mi.Annotations[inputDigestAnnotation] = "sha256:new" }), true, 0},
		{"no input written yet", attempted(func(mi *cairnv1.ModuleInstance) { mi.Annotations = nil }), false, 0},
		{"its spec edited in the cluster", attempted(func(mi *cairnv1.ModuleInstance) { mi.Generation = 3 }), true, 0},
		{"a reconcile requested", attempted(func(mi *cairnv1.ModuleInstance) {
			mi.Annotations[cairnv1.ReconcileRequestAnnotation] = "now"
		}), true, 0},
		{"suspended", attempted(func(mi *cairnv1.ModuleInstance) {
			mi.Spec.Suspend = true
			mi.Annotations[inputDigestAnnotation] = "sha256:new"
		}), false, 0},
		{"resumed: recorded suspended, a retry far away", attempted(func(mi *cairnv1.ModuleInstance) {
			conditions.MarkUnknown(mi, "Ready", cairnv1.ReasonSuspended, "suspended")
			mi.Status.NextRetryAt = &metav1.Time{Time: now.Add(time.Hour)}
		}), true, 0},
		{"failed, retry due", attempted(failed(-time.Second)), true, 0},
		{"failed, retry in a minute", attempted(failed(time.Minute)), false, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			due, after := Due(tc.mi, now)
			g.Expect(due).To(Equal(tc.due))
			g.Expect(after).To(Equal(tc.after))
		})
	}
}

// TestAttemptedIn: a sharded sync takes an instance's outcome from its CR once the CR
// records the revision's input attempted at the generation the revision step wrote,
// or a later one: an edit after the attempt (a new generation nobody has attempted)
// does not hide it. Without the written CR, the CR's own generation must have been
// attempted.
func TestAttemptedIn(t *testing.T) {
	d := &instanceState{instancePlan: instancePlan{inputDigest: "sha256:in"}}
	cr := func(generation, observed int64, input string) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team", Generation: generation}}
		mi.Status.ObservedGeneration, mi.Status.LastAttemptedInput = observed, input
		conditions.MarkTrue(mi, "Ready", cairnv1.ReasonSucceeded, "ok")
		return mi
	}
	written := cr(2, 0, "")
	for _, tc := range []struct {
		name      string
		mi        *cairnv1.ModuleInstance
		written   *cairnv1.ModuleInstance
		attempted bool
	}{
		{"attempted as written", cr(2, 2, "sha256:in"), written, true},
		{"attempted, then edited (generation 3)", cr(3, 2, "sha256:in"), written, true},
		{"not attempted yet: the last attempt was of an older generation", cr(2, 1, "sha256:in"), written, false},
		{"another input attempted", cr(2, 2, "sha256:old"), written, false},
		{"without the written CR, its own generation", cr(3, 2, "sha256:in"), nil, false},
		{"without the written CR, attempted as it is", cr(3, 3, "sha256:in"), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := attemptedIn(tc.mi, d, tc.written)
			NewWithT(t).Expect(out != nil).To(Equal(tc.attempted))
			if out != nil {
				NewWithT(t).Expect(out.Result.Ready).To(BeTrue())
			}
		})
	}
}

// TestHoldsInput: a replica's state serves an instance only at the input its CR
// holds now and only once it holds that CR; a Registry's refresh at the same
// revision needs a state planned afresh, whether the state planned the instance as
// affected or as unchanged.
func TestHoldsInput(t *testing.T) {
	g := NewWithT(t)
	cr := func(name, digest string) *cairnv1.ModuleInstance {
		return &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name,
			Annotations: map[string]string{inputDigestAnnotation: digest}}}
	}
	st := &RevisionState{replica: true, byKey: map[string]*instanceState{
		"team/unchanged": {instancePlan: instancePlan{inputDigest: "sha256:before"}},
		"team/held":      {instancePlan: instancePlan{inputDigest: "sha256:new", affected: true}, mirrored: cr("held", "sha256:new")},
		"team/waiting":   {instancePlan: instancePlan{inputDigest: "sha256:new", affected: true}},
	}}
	g.Expect(st.HoldsInput(cr("unchanged", "sha256:before"))).To(BeTrue(), "its reconcile does nothing")
	g.Expect(st.HoldsInput(cr("unchanged", "sha256:refreshed"))).To(BeFalse(), "a refresh written after the state was built")
	g.Expect(st.HoldsInput(cr("held", "sha256:new"))).To(BeTrue())
	g.Expect(st.HoldsInput(cr("held", "sha256:refreshed"))).To(BeFalse())
	g.Expect(st.HoldsInput(cr("waiting", "sha256:new"))).To(BeFalse(), "its CR not taken yet (see Take)")
	g.Expect(st.HoldsInput(cr("undeclared", "sha256:any"))).To(BeTrue(), "its reconcile says it is not declared")
}

// TestTheRevisionStepListsFromTheAPIServerAfterItsOwnRemovals: a sharded revision
// step reads the CRs from the informer cache, except the first after the engine
// deleted one, which the cache may still hold.
func TestTheRevisionStepListsFromTheAPIServerAfterItsOwnRemovals(t *testing.T) {
	g := NewWithT(t)
	api := fake.NewClientBuilder().WithScheme(Scheme).Build()
	informers := fake.NewClientBuilder().WithScheme(Scheme).Build()
	e := &Engine{cluster: &Cluster{client: api}, opts: Options{Sharded: true, Instances: informers}}
	g.Expect(e.revisionStepLive()).To(BeIdenticalTo(client.Reader(informers)))
	e.deletedCRs.Store(true)
	g.Expect(e.revisionStepLive()).To(BeIdenticalTo(client.Reader(api)), "the first step after a removal")
	g.Expect(e.revisionStepLive()).To(BeIdenticalTo(client.Reader(informers)), "and only that one")
	e.opts.Sharded = false
	g.Expect(e.revisionStepLive()).To(BeIdenticalTo(client.Reader(api)), "unsharded: always the API server")
}

// TestUnrefreshed: a refresh whose new input could not be written into an
// instance's CR is handed back for the next sync, once per Registry; a refresh the
// CR holds already, or an input written, is not.
func TestUnrefreshed(t *testing.T) {
	g := NewWithT(t)
	held := func(token string) *cairnv1.ModuleInstance {
		return &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{refreshAnnotation: token}}}
	}
	failed := errors.New("the API server refused the write")
	s := &RevisionState{runs: []*instanceState{
		{instancePlan: instancePlan{refresh: "modules@T2", was: held("modules@T1")}, mirrorErr: failed},
		{instancePlan: instancePlan{refresh: "modules@T2"}, mirrorErr: failed}, // a new instance: the same Registry once
		{mirrorErr: failed}, // no refresh
		{instancePlan: instancePlan{refresh: "charts@T2", was: held("charts@T1")}},                      // written
		{instancePlan: instancePlan{refresh: "catalog@T1", was: held("catalog@T1")}, mirrorErr: failed}, // carried over, not new
	}}
	g.Expect(s.unrefreshed()).To(Equal([]string{"modules"}))
}

// TestASuspensionInTheClusterNeedsAFreshState: a replica's state built while an
// instance was suspended in the cluster (cairn suspend) does not serve it once
// resumed, nor the other way round: planned afresh, a resumed instance is applied
// again.
func TestASuspensionInTheClusterNeedsAFreshState(t *testing.T) {
	g := NewWithT(t)
	cr := func(suspended bool) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web",
			Annotations: map[string]string{inputDigestAnnotation: "sha256:in"}}}
		if suspended {
			mi.Annotations[cairnv1.SuspendAnnotation] = "true"
		}
		return mi
	}
	st := &RevisionState{replica: true, byKey: map[string]*instanceState{
		"team/web": {instancePlan: instancePlan{inputDigest: "sha256:in", was: cr(true)}},
	}}
	g.Expect(st.HoldsInput(cr(true))).To(BeTrue(), "still suspended")
	g.Expect(st.HoldsInput(cr(false))).To(BeFalse(), "resumed since the state was built")
	st.byKey["team/web"].was = cr(false)
	g.Expect(st.HoldsInput(cr(true))).To(BeFalse(), "suspended since the state was built")
	recorded := cr(false) // resumed, its suspension still recorded: planned unchanged before, it would stay so
	conditions.MarkUnknown(recorded, "Ready", cairnv1.ReasonSuspended, "suspended")
	g.Expect(st.HoldsInput(recorded)).To(BeFalse(), "a suspension recorded since the state was built")
}

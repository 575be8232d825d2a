package reconciler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// TestMarkStatus: what each verdict of a sync writes on an instance's status, from
// the state its last sync left: the conditions kstatus reads (Ready, Stalled,
// Reconciling), the failure count and next retry, the revisions, the history.
func TestMarkStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	transient := outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("connection refused"))
	stalled := outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad module"))
	waiting := outcome.NewWaiting(cairnv1.ReasonDependencyNotReady, errors.New("dependency team-a/db is not ready"))
	progressing := &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: errors.New("applied; waiting")}
	succeededAt := func(mi *cairnv1.ModuleInstance) {
		markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now.Add(-time.Hour))
	}
	failedAt := func(f *outcome.Failure, times int) func(mi *cairnv1.ModuleInstance) {
		return func(mi *cairnv1.ModuleInstance) {
			succeededAt(mi)
			for range times {
				markFailed(mi, "old", f, now.Add(-time.Minute))
			}
		}
	}
	succeed := func(mi *cairnv1.ModuleInstance) {
		markSucceeded(mi, "new", cairnv1.ReasonSucceeded, "3 objects applied", now)
	}
	fail := func(f *outcome.Failure) func(mi *cairnv1.ModuleInstance) {
		return func(mi *cairnv1.ModuleInstance) { markFailed(mi, "new", f, now) }
	}
	for _, tc := range []struct {
		name        string
		before      func(mi *cairnv1.ModuleInstance)
		mark        func(mi *cairnv1.ModuleInstance)
		ready       metav1.ConditionStatus
		reason      string
		stalled     bool
		reconciling bool
		failures    int32
		retryIn     time.Duration // 0: no retry
		applied     string
		history     string // the newest entry's result
	}{
		{name: "a first success", mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new", history: "Succeeded"},
		{name: "a success clears a stalled failure", before: failedAt(stalled, 1), mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new", history: "Succeeded"},
		{name: "a success clears a transient failure and its count", before: failedAt(transient, 3), mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new", history: "Succeeded"},
		{name: "a transient failure keeps the last applied revision", before: succeededAt, mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 1, retryIn: 5 * time.Second,
			applied: "old", history: "Failed"},
		{name: "a third transient failure backs off", before: failedAt(transient, 2), mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 3, retryIn: 20 * time.Second,
			applied: "old", history: "Failed"},
		{name: "a stalled failure is not reconciling", before: succeededAt, mark: fail(stalled),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonRenderFailed, stalled: true, failures: 1, retryIn: 30 * time.Minute,
			applied: "old", history: "Failed"},
		{name: "a stalled failure after a transient one is no longer reconciling", before: failedAt(transient, 1), mark: fail(stalled),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonRenderFailed, stalled: true, failures: 2, retryIn: 30 * time.Minute,
			applied: "old", history: "Failed"},
		{name: "a transient failure after a stalled one is no longer stalled", before: failedAt(stalled, 1), mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 2, retryIn: 10 * time.Second,
			applied: "old", history: "Failed"},
		{name: "waiting for a dependency backs off like a transient failure", before: succeededAt, mark: fail(waiting),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonDependencyNotReady, reconciling: true, failures: 1, retryIn: 5 * time.Second,
			applied: "old", history: "Failed"},
		{name: "progressing is Ready Unknown and reconciling", before: failedAt(stalled, 1), mark: fail(progressing),
			ready: metav1.ConditionUnknown, reason: cairnv1.ReasonProgressing, reconciling: true, failures: 2, retryIn: 10 * time.Second,
			applied: "old", history: "Progressing"},
		{name: "suspended after a failure: no retry, the history as it was", before: failedAt(transient, 2),
			mark:  func(mi *cairnv1.ModuleInstance) { markSuspended(mi, false) },
			ready: metav1.ConditionUnknown, reason: cairnv1.ReasonSuspended, failures: 2, applied: "old", history: "Failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 4}}
			if tc.before != nil {
				tc.before(mi)
			}
			mi.Generation = 5
			tc.mark(mi)

			ready := conditions.Get(mi, "Ready")
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tc.ready))
			g.Expect(ready.Reason).To(Equal(tc.reason))
			g.Expect(conditions.IsTrue(mi, "Stalled")).To(Equal(tc.stalled), "Stalled")
			g.Expect(conditions.Has(mi, "Stalled")).To(Equal(tc.stalled), "no Stalled=False left behind")
			g.Expect(conditions.IsTrue(mi, "Reconciling")).To(Equal(tc.reconciling), "Reconciling")
			g.Expect(conditions.Has(mi, "Reconciling")).To(Equal(tc.reconciling), "no Reconciling=False left behind")
			g.Expect(mi.Status.ObservedGeneration).To(Equal(int64(5)))
			g.Expect(mi.Status.Failures).To(Equal(tc.failures))
			if tc.retryIn == 0 {
				g.Expect(mi.Status.NextRetryAt).To(BeNil())
			} else {
				g.Expect(mi.Status.NextRetryAt).NotTo(BeNil())
				g.Expect(mi.Status.NextRetryAt.Time).To(Equal(now.Add(tc.retryIn)))
			}
			g.Expect(mi.Status.LastAppliedRevision).To(Equal(tc.applied))
			g.Expect(mi.Status.History).NotTo(BeEmpty())
			g.Expect(mi.Status.History[0].Result).To(Equal(tc.history))
		})
	}
}

// TestHistory: each attempt is recorded first, with the render digest and the
// object count it left, and the history keeps the last ten.
func TestHistory(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mi := &cairnv1.ModuleInstance{}
	markFailed(mi, "rev-0", outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad")), start)
	g.Expect(mi.Status.History).To(HaveLen(1))
	g.Expect(mi.Status.History[0].Objects).To(BeZero(), "no inventory yet")

	for i := 1; i <= 12; i++ {
		mi.Status.RenderDigest = fmt.Sprintf("digest-%d", i)
		mi.Status.Inventory = &cairnv1.Inventory{Count: int32(i)}
		markSucceeded(mi, fmt.Sprintf("rev-%d", i), cairnv1.ReasonSucceeded, "ok", start.Add(time.Duration(i)*time.Minute))
	}
	g.Expect(mi.Status.History).To(HaveLen(historyLimit))
	newest, oldest := mi.Status.History[0], mi.Status.History[historyLimit-1]
	g.Expect(newest).To(Equal(cairnv1.HistoryEntry{Revision: "rev-12", Time: metav1.NewTime(start.Add(12 * time.Minute)),
		Result: "Succeeded", Reason: cairnv1.ReasonSucceeded, RenderDigest: "digest-12", Objects: 12}))
	g.Expect(oldest.Revision).To(Equal("rev-3"), "the oldest entries leave first")
	g.Expect(mi.Status.LastAttemptedRevision).To(Equal("rev-12"))
}

// TestRetryAfter: transient and waiting failures back off from 5s, doubling up to
// 5m; a stalled one is checked again after 30m; a health check handed over is
// rechecked from 5s, doubling up to 30s.
func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		kind     outcome.Kind
		failures int32
		want     time.Duration
	}{
		{outcome.Transient, 0, 5 * time.Second},
		{outcome.Transient, 1, 5 * time.Second},
		{outcome.Transient, 2, 10 * time.Second},
		{outcome.Transient, 3, 20 * time.Second},
		{outcome.Transient, 6, 160 * time.Second},
		{outcome.Transient, 7, 5 * time.Minute},
		{outcome.Transient, 1000, 5 * time.Minute},
		{outcome.Waiting, 3, 20 * time.Second},
		{outcome.Waiting, 9, 5 * time.Minute},
		{outcome.Stalled, 1, 30 * time.Minute},
		{outcome.Stalled, 50, 30 * time.Minute},
		{outcome.Progressing, 1, 5 * time.Second},
		{outcome.Progressing, 3, 20 * time.Second},
		{outcome.Progressing, 4, 30 * time.Second},
		{outcome.Progressing, 100, 30 * time.Second},
	} {
		NewWithT(t).Expect(retryAfter(tc.kind, tc.failures)).To(Equal(tc.want), "%s after %d failure(s)", tc.kind, tc.failures)
	}
}

// TestSuspension: whether a suspended instance's CR says so already (nothing to
// write), and whether its dependents may go ahead (its last attempt succeeded, so
// its objects are there).
func TestSuspension(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name       string
		inGit      bool
		annotated  bool
		live       func(mi *cairnv1.ModuleInstance) // nil: no CR
		recorded   bool                             // suspendedAs
		satisfies  bool
		suspended  bool
		requestNew bool // reconcileRequested
	}{
		{name: "suspended in Git, recorded, after a success", inGit: true, suspended: true, recorded: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now)
				markSuspended(mi, false)
			}},
		{name: "suspended in Git after a failure: its dependents wait", inGit: true, suspended: true, recorded: true,
			live: func(mi *cairnv1.ModuleInstance) {
				markFailed(mi, "old", outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad")), now)
				markSuspended(mi, false)
			}},
		{name: "suspended in Git, never synced", inGit: true, suspended: true},
		{name: "suspended in the cluster, recorded as suspended in Git: written again", annotated: true, suspended: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now)
				markSuspended(mi, false)
			}},
		{name: "suspended in the cluster, recorded so", annotated: true, suspended: true, recorded: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now)
				markSuspended(mi, true)
			}},
		{name: "ready and not suspended", satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) { markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now) }},
		{name: "a reconcile request not handled yet", satisfies: true, requestNew: true,
			live: func(mi *cairnv1.ModuleInstance) {
				markSucceeded(mi, "old", cairnv1.ReasonSucceeded, "ok", now)
				mi.Annotations[cairnv1.ReconcileRequestAnnotation] = "2026-12-01T10:00:00Z"
				mi.Status.LastHandledReconcileAt = "2026-11-30T10:00:00Z"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			mi.Spec.Suspend = tc.inGit
			r := &instanceRun{mi: mi}
			if tc.live != nil {
				r.live = mi.DeepCopy()
				r.live.Annotations = map[string]string{}
				if tc.annotated {
					r.live.Annotations[cairnv1.SuspendAnnotation] = "true"
				}
				tc.live(r.live)
				g.Expect(suspendedAs(r.live)).To(Equal(tc.recorded), "suspendedAs")
				g.Expect(reconcileRequested(r.live)).To(Equal(tc.requestNew), "reconcileRequested")
			}
			g.Expect(r.suspended()).To(Equal(tc.suspended), "suspended")
			g.Expect(r.satisfiesDependents()).To(Equal(tc.satisfies), "satisfiesDependents")
			if tc.suspended && r.live != nil {
				g.Expect(r.result().Action).To(Equal(outcome.ActionSkipped))
			}
		})
	}
}

func TestMarkSourceReconcileHandled(t *testing.T) {
	g := NewWithT(t)
	p := &cairnv1.Platform{}
	p.Status.LastHandledReconcileAt = "before"
	markSourceReconcileHandled(p)
	g.Expect(p.Status.LastHandledReconcileAt).To(Equal("before"), "no request: left as it was")
	p.Annotations = map[string]string{cairnv1.ReconcileRequestAnnotation: "2026-12-01T10:00:00Z"}
	markSourceReconcileHandled(p)
	g.Expect(p.Status.LastHandledReconcileAt).To(Equal("2026-12-01T10:00:00Z"))
}

package reconciler

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
)

func TestRetryDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	failed := func(kind outcome.Kind, failures int32, at time.Time, rev string) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{}
		mi.Status.Failures = failures - 1
		f := outcome.Failuref(kind, cairnv1.ReasonApplyFailed, "boom")
		switch kind {
		case outcome.Waiting:
			f.Reason = cairnv1.ReasonDependencyNotReady
		case outcome.Progressing:
			f.Reason = cairnv1.ReasonProgressing
		}
		if rev == "interrupted" {
			f.Reason = cairnv1.ReasonInterrupted
		}
		status.Failed(mi, rev, f, at)
		return mi
	}
	cases := []struct {
		name    string
		live    *cairnv1.ModuleInstance
		rev     string
		want    bool
		wantWhy string
	}{
		{"a new commit retries a stalled instance at once", failed(outcome.Stalled, 1, now, "old"), "new", true, "new revision"},
		{"stalled: not before 30 minutes", failed(outcome.Stalled, 1, now.Add(-29*time.Minute), "sha"), "sha", false, "2026-12-01T10:01:00Z (Stalled)"},
		{"stalled: after 30 minutes", failed(outcome.Stalled, 1, now.Add(-30*time.Minute), "sha"), "sha", true, "Stalled retry due"},
		{"transient, first failure: 5s", failed(outcome.Transient, 1, now.Add(-5*time.Second), "sha"), "sha", true, "Transient retry due"},
		{"transient, first failure: not at 4s", failed(outcome.Transient, 1, now.Add(-4*time.Second), "sha"), "sha", false, "(Transient)"},
		{"transient, third failure: 20s", failed(outcome.Transient, 3, now.Add(-19*time.Second), "sha"), "sha", false, "10:00:01Z"},
		{"transient backoff is capped at 5m", failed(outcome.Transient, 20, now.Add(-5*time.Minute), "sha"), "sha", true, "retry due"},
		{"waiting backs off like transient", failed(outcome.Waiting, 2, now.Add(-10*time.Second), "sha"), "sha", true, "Waiting retry due"},
		{"progressing: rechecked after 5s", failed(outcome.Progressing, 1, now.Add(-5*time.Second), "sha"), "sha", true, "Progressing retry due"},
		{"progressing: not at 4s", failed(outcome.Progressing, 1, now.Add(-4*time.Second), "sha"), "sha", false, "(Progressing)"},
		{"progressing rechecks are capped at 30s", failed(outcome.Progressing, 20, now.Add(-30*time.Second), "sha"), "sha", true, "Progressing retry due"},
		{"interrupted: resumed at once, as its message says", failed(outcome.Transient, 3, now, "interrupted"), "interrupted", true, "resuming an interrupted sync"},
		{"no retry time recorded: retried", &cairnv1.ModuleInstance{Status: cairnv1.ModuleInstanceStatus{LastAttemptedRevision: "sha"}}, "sha", true, "retrying a failed sync"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			due, why := retryDue(c.live, c.rev, now)
			g.Expect(due).To(Equal(c.want), why)
			g.Expect(why).To(ContainSubstring(c.wantWhy))
		})
	}
}

func TestRetryDueAt(t *testing.T) {
	g := NewWithT(t)
	at := func(d time.Duration) *time.Time { x := time.Unix(1000, 0).Add(d); return &x }
	g.Expect(RetryDue(time.Time{}, time.Now())).To(BeFalse(), "nothing scheduled")
	g.Expect(RetryDue(*at(0), *at(0))).To(BeTrue())
	g.Expect(RetryDue(*at(time.Second), *at(0))).To(BeFalse())
}

func TestDeferredResultKeepsTheLastFailure(t *testing.T) {
	g := NewWithT(t)
	live := &cairnv1.ModuleInstance{}
	status.Failed(live, "sha", outcome.Failuref(outcome.Stalled, cairnv1.ReasonRenderFailed, "bad module"), time.Unix(0, 0))
	g.Expect(conditions.IsTrue(live, "Stalled")).To(BeTrue())
	r := &instanceState{instancePlan: instancePlan{mi: live, why: "not retried before x (Stalled)", was: live}}
	res := r.result()
	g.Expect(res.Action).To(BeEquivalentTo("Failed"))
	g.Expect(res.Retry).To(Equal(outcome.Stalled))
	g.Expect(res.Reason).To(Equal(cairnv1.ReasonRenderFailed))
	g.Expect(res.Message).To(Equal("not retried before x (Stalled): bad module"))
	g.Expect(*res.NextRetryAt).To(Equal(time.Unix(0, 0).Add(30 * time.Minute)))
}

func TestProgressingIsUnknownNotFailed(t *testing.T) {
	g := NewWithT(t)
	live := &cairnv1.ModuleInstance{}
	status.Record(live, status.Attempt{Revision: "sha", Now: time.Unix(0, 0), Render: &status.Render{Digest: "hmac-sha256:r"},
		Failure: outcome.Failuref(outcome.Progressing, cairnv1.ReasonProgressing, "applied; waiting")})
	g.Expect(conditions.IsUnknown(live, "Ready")).To(BeTrue())
	g.Expect(conditions.GetReason(live, "Ready")).To(Equal(cairnv1.ReasonProgressing))
	g.Expect(conditions.IsTrue(live, "Reconciling")).To(BeTrue())
	g.Expect(conditions.Has(live, "Stalled")).To(BeFalse())
	g.Expect(live.Status.History[0].Result).To(Equal(cairnv1.HistoryProgressing))
	r := &instanceState{instancePlan: instancePlan{mi: live, why: "not retried before x (Progressing)", was: live}}
	res := r.result()
	g.Expect(res.Action).To(BeEquivalentTo("Progressing"))
	g.Expect(res.Retry).To(Equal(outcome.Progressing))
	g.Expect(res.Ready).To(BeFalse())
}

package status

import (
	"errors"
	"fmt"
	"strings"
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
// Reconciling), the failure count and next retry, the revisions.
func TestMarkStatus(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	transient := outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("connection refused"))
	stalled := outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad module"))
	waiting := outcome.NewWaiting(cairnv1.ReasonDependencyNotReady, errors.New("dependency team-a/db is not ready"))
	progressing := &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: errors.New("applied; waiting")}
	succeededAt := func(mi *cairnv1.ModuleInstance) {
		Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
	}
	failedAt := func(f *outcome.Failure, times int) func(mi *cairnv1.ModuleInstance) {
		return func(mi *cairnv1.ModuleInstance) {
			succeededAt(mi)
			for range times {
				Failed(mi, "old", f, now.Add(-time.Minute))
			}
		}
	}
	succeed := func(mi *cairnv1.ModuleInstance) {
		Succeeded(mi, "new", cairnv1.ReasonSucceeded, "3 objects applied")
	}
	fail := func(f *outcome.Failure) func(mi *cairnv1.ModuleInstance) {
		return func(mi *cairnv1.ModuleInstance) { Failed(mi, "new", f, now) }
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
	}{
		{name: "a first success", mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new"},
		{name: "a success clears a stalled failure", before: failedAt(stalled, 1), mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new"},
		{name: "a success clears a transient failure and its count", before: failedAt(transient, 3), mark: succeed,
			ready: metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, applied: "new"},
		{name: "a transient failure keeps the last applied revision", before: succeededAt, mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 1, retryIn: 5 * time.Second,
			applied: "old"},
		{name: "a third transient failure backs off", before: failedAt(transient, 2), mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 3, retryIn: 20 * time.Second,
			applied: "old"},
		{name: "a stalled failure is not reconciling", before: succeededAt, mark: fail(stalled),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonRenderFailed, stalled: true, failures: 1, retryIn: 30 * time.Minute,
			applied: "old"},
		{name: "a stalled failure after a transient one is no longer reconciling", before: failedAt(transient, 1), mark: fail(stalled),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonRenderFailed, stalled: true, failures: 2, retryIn: 30 * time.Minute,
			applied: "old"},
		{name: "a transient failure after a stalled one is no longer stalled", before: failedAt(stalled, 1), mark: fail(transient),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonApplyFailed, reconciling: true, failures: 2, retryIn: 10 * time.Second,
			applied: "old"},
		{name: "waiting for a dependency backs off like a transient failure", before: succeededAt, mark: fail(waiting),
			ready: metav1.ConditionFalse, reason: cairnv1.ReasonDependencyNotReady, reconciling: true, failures: 1, retryIn: 5 * time.Second,
			applied: "old"},
		{name: "progressing is Ready Unknown and reconciling", before: failedAt(stalled, 1), mark: fail(progressing),
			ready: metav1.ConditionUnknown, reason: cairnv1.ReasonProgressing, reconciling: true, failures: 2, retryIn: 10 * time.Second,
			applied: "old"},
		{name: "suspended after a failure: no retry, the history as it was", before: failedAt(transient, 2),
			mark:  func(mi *cairnv1.ModuleInstance) { Suspended(mi, false) },
			ready: metav1.ConditionUnknown, reason: cairnv1.ReasonSuspended, failures: 2, applied: "old"},
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
			g.Expect(mi.Status.History).To(BeEmpty(), "only Record adds renders to the history")
		})
	}
}

// TestHistory: the history lists the renders applied, newest first, whatever
// became of them, and nothing for an attempt that applied none; the same render
// again updates the newest entry's result only; it holds max(10, keep) renders.
func TestHistory(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	artifact := func(i int) *cairnv1.PublishedArtifact {
		return &cairnv1.PublishedArtifact{Ref: fmt.Sprintf("registry/team-a/web:sha256-%d", i), Digest: fmt.Sprintf("sha256:m%d", i), KeyID: "0123456789ab"}
	}
	// attempt i applies render i (render < 0: applies nothing) at rev-i, minute i.
	attempt := func(i, render int, f *outcome.Failure) Attempt {
		a := Attempt{Revision: fmt.Sprintf("rev-%d", i), Now: start.Add(time.Duration(i) * time.Minute), Failure: f,
			Applied: Applied{RenderDigest: fmt.Sprintf("hmac-sha256:%d", render), Reason: cairnv1.ReasonSucceeded}}
		if render >= 0 {
			a.Render = &Render{Digest: fmt.Sprintf("hmac-sha256:%d", render), Objects: int32(render), Published: artifact(render)}
		}
		return a
	}
	entry := func(i, render int, result, reason string) cairnv1.HistoryEntry {
		return cairnv1.HistoryEntry{Revision: fmt.Sprintf("rev-%d", i), Time: metav1.NewTime(start.Add(time.Duration(i) * time.Minute)),
			Result: result, Reason: reason, RenderDigest: fmt.Sprintf("hmac-sha256:%d", render), Objects: int32(render), Published: artifact(render)}
	}
	unhealthy := outcome.NewTransient(cairnv1.ReasonHealthCheckFailed, errors.New("timed out"))
	progressing := &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: errors.New("applied; waiting")}
	rendering := outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad"))
	for _, tc := range []struct {
		name     string
		attempts []Attempt
		want     []cairnv1.HistoryEntry
	}{
		{name: "a render applied and Ready", attempts: []Attempt{attempt(1, 1, nil)},
			want: []cairnv1.HistoryEntry{entry(1, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)}},
		{name: "an attempt that applied nothing adds nothing", attempts: []Attempt{attempt(1, 1, nil), attempt(2, -1, rendering)},
			want: []cairnv1.HistoryEntry{entry(1, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)}},
		{name: "a render applied, then unhealthy", attempts: []Attempt{attempt(1, 1, nil), attempt(2, 2, unhealthy)},
			want: []cairnv1.HistoryEntry{entry(2, 2, cairnv1.HistoryFailed, cairnv1.ReasonHealthCheckFailed), entry(1, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)}},
		{name: "a health recheck of the same render updates its result, not its revision or time",
			attempts: []Attempt{attempt(1, 1, progressing), attempt(2, 1, nil)},
			want:     []cairnv1.HistoryEntry{entry(1, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)}},
		{name: "a rollback to an older render is a new entry", attempts: []Attempt{attempt(1, 1, nil), attempt(2, 2, nil), attempt(3, 1, nil)},
			want: []cairnv1.HistoryEntry{entry(3, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded), entry(2, 2, cairnv1.HistoryReady, cairnv1.ReasonSucceeded),
				entry(1, 1, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mi := &cairnv1.ModuleInstance{}
			for _, a := range tc.attempts {
				Record(mi, a)
			}
			NewWithT(t).Expect(mi.Status.History).To(Equal(tc.want))
		})
	}
	for _, tc := range []struct{ keep, want int }{{0, 10}, {3, 10}, {10, 10}, {12, 12}, {20, 13}} {
		mi := &cairnv1.ModuleInstance{}
		for i := 1; i <= 13; i++ {
			a := attempt(i, i, nil)
			a.Keep = tc.keep
			Record(mi, a)
		}
		g := NewWithT(t)
		g.Expect(mi.Status.History).To(HaveLen(tc.want), "keep %d", tc.keep)
		g.Expect(mi.Status.History[0]).To(Equal(entry(13, 13, cairnv1.HistoryReady, cairnv1.ReasonSucceeded)), "newest first")
		g.Expect(mi.Status.History[tc.want-1].Revision).To(Equal(fmt.Sprintf("rev-%d", 14-tc.want)), "the oldest leave first")
	}
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
		NewWithT(t).Expect(RetryAfter(tc.kind, tc.failures)).To(Equal(tc.want), "%s after %d failure(s)", tc.kind, tc.failures)
	}
}

// TestRecord: the status an attempt leaves, from the status of the last good sync:
// a success moves the last good state, a failure records only the attempt, an
// attempt at an unchanged input leaves the last attempted input and artifacts.
func TestRecord(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	good := Applied{SourceDigest: "sha256:src-old", ValuesDigest: "sha256:values-old", RenderDigest: "hmac-sha256:old",
		ServiceAccount: "team-a-deployer", Provides: []string{"Widget.example.com"},
		Published: &cairnv1.PublishedArtifact{Ref: "registry/team-a/web@sha256:old"}, Reason: cairnv1.ReasonSucceeded, Message: "3 objects applied"}
	verified := []cairnv1.ArtifactStatus{{Ref: "oci://charts/web:1.0.0", Verification: cairnv1.VerificationVerified}}
	unverified := []cairnv1.ArtifactStatus{{Ref: "oci://charts/web:1.1.0", Verification: cairnv1.VerificationFailed,
		Reason: cairnv1.ReasonSignatureMissing, Message: "no signature"}}
	lastGood := func() *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1,
			Annotations: map[string]string{cairnv1.ReconcileRequestAnnotation: "2026-12-03T09:59:00Z"}}}
		Record(mi, Attempt{Revision: "old", Now: now.Add(-time.Hour), Input: "sha256:input-old", Artifacts: verified, Applied: good,
			Render: &Render{Digest: "hmac-sha256:old", Objects: 3}})
		mi.Generation = 2
		return mi
	}
	newState := Applied{SourceDigest: "sha256:src-new", ValuesDigest: "sha256:values-new", RenderDigest: "hmac-sha256:new",
		CapabilitiesDigest: "sha256:caps", ServiceAccount: "team-a-deployer",
		Requires: []cairnv1.ContractRequirement{{Instance: "platform/crds", Kinds: []string{"Widget.example.com"}}},
		Reason:   cairnv1.ReasonSucceeded, Message: "1 object changed"}
	for _, tc := range []struct {
		name    string
		attempt Attempt
		check   func(g *WithT, mi *cairnv1.ModuleInstance)
	}{
		{name: "a success moves the last good state", attempt: Attempt{Revision: "new", Now: now, Input: "sha256:input-new", Artifacts: verified, Applied: newState,
			Render: &Render{Digest: "hmac-sha256:new", Objects: 1}},
			check: func(g *WithT, mi *cairnv1.ModuleInstance) {
				g.Expect(mi.Status.LastAppliedRevision).To(Equal("new"))
				g.Expect(mi.Status.LastAttemptedInput).To(Equal("sha256:input-new"))
				g.Expect(mi.Status.SourceDigest).To(Equal("sha256:src-new"))
				g.Expect(mi.Status.RenderDigest).To(Equal("hmac-sha256:new"))
				g.Expect(mi.Status.CapabilitiesDigest).To(Equal("sha256:caps"))
				g.Expect(mi.Status.Provides).To(BeEmpty(), "it provides nothing now")
				g.Expect(mi.Status.Requires).To(HaveLen(1))
				g.Expect(mi.Status.Published.Ref).To(Equal("registry/team-a/web@sha256:old"), "not published this time: the last artifact stays")
				g.Expect(mi.Status.ObservedGeneration).To(Equal(int64(2)))
				g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())
				g.Expect(conditions.GetMessage(mi, "Ready")).To(Equal("1 object changed"))
				g.Expect(conditions.IsTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue())
				g.Expect(mi.Status.History).To(HaveLen(2))
				g.Expect(mi.Status.History[0].RenderDigest).To(Equal("hmac-sha256:new"))
				g.Expect(mi.Status.LastHandledReconcileAt).To(BeEmpty(), "no reconcile was asked for")
			}},
		{name: "a failure records the attempt and keeps the last good state",
			attempt: Attempt{Revision: "new", Now: now, Input: "sha256:input-new", Artifacts: unverified,
				Failure: outcome.NewStalled(cairnv1.ReasonSignatureMissing, errors.New("oci://charts/web:1.1.0: no signature")), Applied: newState},
			check: func(g *WithT, mi *cairnv1.ModuleInstance) {
				g.Expect(mi.Status.LastAppliedRevision).To(Equal("old"))
				g.Expect(mi.Status.LastAttemptedRevision).To(Equal("new"))
				g.Expect(mi.Status.LastAttemptedInput).To(Equal("sha256:input-new"), "attempted: not tried again before its retry")
				g.Expect(mi.Status.SourceDigest).To(Equal("sha256:src-old"))
				g.Expect(mi.Status.RenderDigest).To(Equal("hmac-sha256:old"))
				g.Expect(mi.Status.Provides).To(Equal([]string{"Widget.example.com"}))
				g.Expect(mi.Status.Artifacts).To(Equal(unverified))
				g.Expect(conditions.IsFalse(mi, cairnv1.VerifiedCondition)).To(BeTrue())
				g.Expect(conditions.GetMessage(mi, cairnv1.VerifiedCondition)).To(Equal("oci://charts/web:1.1.0: no signature"))
				g.Expect(conditions.IsTrue(mi, "Stalled")).To(BeTrue())
				g.Expect(mi.Status.History).To(HaveLen(1), "nothing applied: no entry")
				g.Expect(mi.Status.History[0].RenderDigest).To(Equal("hmac-sha256:old"))
			}},
		{name: "a recheck at the same input leaves the attempted input and artifacts",
			attempt: Attempt{Revision: "new", Now: now, Failure: outcome.NewTransient(cairnv1.ReasonHealthCheckFailed, errors.New("timed out"))},
			check: func(g *WithT, mi *cairnv1.ModuleInstance) {
				g.Expect(mi.Status.LastAttemptedInput).To(Equal("sha256:input-old"))
				g.Expect(mi.Status.Artifacts).To(Equal(verified))
				g.Expect(conditions.IsTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue())
				g.Expect(mi.Status.NextRetryAt.Time).To(Equal(now.Add(5 * time.Second)))
			}},
		{name: "a requested reconcile is handled whatever the outcome",
			attempt: Attempt{Revision: "new", Now: now, Forced: true, Failure: outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("conflict"))},
			check: func(g *WithT, mi *cairnv1.ModuleInstance) {
				g.Expect(mi.Status.LastHandledReconcileAt).To(Equal("2026-12-03T09:59:00Z"))
				g.Expect(conditions.IsFalse(mi, "Ready")).To(BeTrue())
			}},
		{name: "a published render is recorded", attempt: Attempt{Revision: "new", Now: now, Input: "sha256:input-new",
			Applied: Applied{RenderDigest: "hmac-sha256:new", Published: &cairnv1.PublishedArtifact{Ref: "registry/team-a/web@sha256:new"}, Reason: cairnv1.ReasonSucceeded}},
			check: func(g *WithT, mi *cairnv1.ModuleInstance) {
				g.Expect(mi.Status.Published.Ref).To(Equal("registry/team-a/web@sha256:new"))
				g.Expect(conditions.Has(mi, cairnv1.VerifiedCondition)).To(BeFalse(), "no OCI artifact: nothing to verify")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mi := lastGood()
			Record(mi, tc.attempt)
			tc.check(NewWithT(t), mi)
		})
	}
}

// TestHold: the annotation's value is the request (anything else still holds,
// naming nobody); a hold records the last good state with who asked and Held=True
// naming them; an instance with nothing applied cannot be held; the release, and a
// reconcile recorded once the annotation is gone, clear both.
func TestHold(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	mi := &cairnv1.ModuleInstance{}
	g.Expect(HoldRequested(mi)).To(BeNil())
	mi.Annotations = map[string]string{cairnv1.HoldAnnotation: "yes please"}
	g.Expect(HoldRequested(mi)).To(Equal(&cairnv1.HoldRequest{}), "not JSON: held, naming nobody")
	at := metav1.NewTime(now.Add(-time.Minute))
	mi.Annotations[cairnv1.HoldAnnotation] = fmt.Sprintf(`{"by":"alice","at":%q,"untilChange":true}`, at.Format(time.RFC3339))
	req := HoldRequested(mi)
	g.Expect(req.By).To(Equal("alice"))
	g.Expect(req.UntilChange).To(BeTrue())

	g.Expect(Hold(mi, req, "sha256:in", now)).To(BeFalse(), "nothing applied: nothing to hold")
	g.Expect(mi.Status.Held).To(BeNil())
	mi.Status.LastAppliedRevision, mi.Status.RenderDigest = "0123456789abcdef", "hmac-sha256:aa"
	mi.Status.Published = &cairnv1.PublishedArtifact{Ref: "r/p:t", Digest: "sha256:pp"}
	g.Expect(Hold(mi, req, "sha256:in", now)).To(BeTrue())
	g.Expect(*mi.Status.Held).To(Equal(cairnv1.HeldRender{Revision: "0123456789abcdef", RenderDigest: "hmac-sha256:aa",
		Published: mi.Status.Published, InputDigest: "sha256:in", By: "alice", At: req.At, UntilChange: true, Since: metav1.NewTime(now)}))
	g.Expect(conditions.IsTrue(mi, cairnv1.HeldCondition)).To(BeTrue())
	g.Expect(conditions.GetMessage(mi, cairnv1.HeldCondition)).To(Equal("held at hmac-sha256:aa (revision 0123456789ab) by alice since " +
		"2026-12-05T03:00:00Z: new commits are not applied until one changes this instance's declaration or module, or `cairn release`"))

	g.Expect(SameHold(mi.Status.Held, req)).To(BeTrue())
	long := &cairnv1.HoldRequest{By: strings.Repeat("m", 5000)}
	other := mi.DeepCopy()
	g.Expect(Hold(other, long, "", now)).To(BeTrue())
	g.Expect(len(other.Status.Held.By)).To(BeNumerically("<", 300), "who asked, bounded")
	g.Expect(SameHold(other.Status.Held, long)).To(BeTrue(), "recorded once, not again at each revision")

	mi.Annotations[cairnv1.HoldAnnotation] = `{"by":"bob","release":true}`
	g.Expect(HoldRequested(mi)).To(BeNil(), "a release is no hold")
	g.Expect(ReleaseRequested(mi).By).To(Equal("bob"))
	g.Expect(ReleasedBy(ReleaseRequested(mi))).To(HavePrefix("released by bob "))
	mi.Annotations[cairnv1.HoldAnnotation] = fmt.Sprintf(`{"by":"alice","at":%q,"untilChange":true}`, at.Format(time.RFC3339))
	g.Expect(ReleaseRequested(mi)).To(BeNil())

	Record(mi, Attempt{Revision: "next", Now: now}) // still annotated: still held
	g.Expect(mi.Status.Held).NotTo(BeNil())
	delete(mi.Annotations, cairnv1.HoldAnnotation)
	Record(mi, Attempt{Revision: "next", Now: now})
	g.Expect(mi.Status.Held).To(BeNil(), "released: the reconcile is Git's again")
	g.Expect(conditions.Has(mi, cairnv1.HeldCondition)).To(BeFalse())
}

// TestRollbackTarget: a rollback names a render of the history by its digest or by
// the revision it was applied at (7 characters at least); an unknown or ambiguous
// name is an error that lists the history.
func TestRollbackTarget(t *testing.T) {
	g := NewWithT(t)
	mi := &cairnv1.ModuleInstance{}
	mi.Namespace, mi.Name = "team-a", "web"
	mi.Status.History = []cairnv1.HistoryEntry{
		{Revision: "abcdef0123456789", RenderDigest: "hmac-sha256:22"},
		{Revision: "abcdef0999999999", RenderDigest: "hmac-sha256:11"},
	}
	got, err := RollbackTarget(mi, "hmac-sha256:11")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Revision).To(Equal("abcdef0999999999"))
	got, err = RollbackTarget(mi, "abcdef01")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.RenderDigest).To(Equal("hmac-sha256:22"))
	_, err = RollbackTarget(mi, "abcdef0")
	g.Expect(err).To(MatchError(ContainSubstring("names 2 renders")))
	_, err = RollbackTarget(mi, "abc")
	g.Expect(err).To(MatchError(ContainSubstring("is no render of team-a/web's history (status.history: abcdef012345 hmac-sha256:22")))

	// The render of a revision applied twice (rolled back to): one render, the published entry.
	mi.Status.History = append([]cairnv1.HistoryEntry{{Revision: "abcdef0999999999", RenderDigest: "hmac-sha256:11"}},
		cairnv1.HistoryEntry{Revision: "abcdef0999999999", RenderDigest: "hmac-sha256:11",
			Published: &cairnv1.PublishedArtifact{Digest: "sha256:aa"}})
	got, err = RollbackTarget(mi, "abcdef09")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Published).NotTo(BeNil())
}

// TestHistoryRecordsHowLongTheReconcileTook: an entry carries its reconcile's
// duration when the attempt knows it.
func TestHistoryRecordsHowLongTheReconcileTook(t *testing.T) {
	g := NewWithT(t)
	mi := &cairnv1.ModuleInstance{}
	Record(mi, Attempt{Revision: "a", Now: time.Now(), Input: "sha256:in", Took: 1234567 * time.Microsecond,
		Render: &Render{Digest: "hmac-sha256:r", Objects: 2}})
	g.Expect(mi.Status.History).To(HaveLen(1))
	g.Expect(mi.Status.History[0].Duration).NotTo(BeNil())
	g.Expect(mi.Status.History[0].Duration.Duration).To(Equal(1235 * time.Millisecond))
}

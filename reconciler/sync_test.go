package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render/declarations"
)

// recordingReporter keeps what it is told of a sync.
type recordingReporter struct {
	report.Nop
	instances map[report.InstanceKey]InstanceResult
	finished  *SyncResult
}

func (r *recordingReporter) InstanceFinished(_ string, k report.InstanceKey, res InstanceResult) {
	r.instances[k] = res
}

func (r *recordingReporter) SyncFinished(_ string, res *SyncResult) { r.finished = res }

// TestFinishRecordsTheRevisionOnThePlatform: the end of a sync writes the
// revision, the instance counts and a Ready verdict on the Platform's status and
// reports the result, sorted, with the invalid declarations among it; an
// interrupted sync records the attempt but not the revision as synced.
func TestFinishRecordsTheRevisionOnThePlatform(t *testing.T) {
	const sha = "0123456789abcdef0123456789abcdef01234567"
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ready := func(ns, name string) InstanceResult {
		return InstanceResult{Namespace: ns, Name: name, Action: outcome.ActionUpdated, Ready: true}
	}
	invalid := &declarations.Error{Reason: declarations.ReasonInvalidModule, File: "instances/bad.yaml", Line: 3,
		Kind: cairnv1.ModuleInstanceKind, Object: "team-a/bad", Field: "spec.module", Message: "no module kind set"}
	for _, tc := range []struct {
		name        string
		results     []InstanceResult
		invalid     []*declarations.Error
		interrupted bool
		ready       metav1.ConditionStatus
		reason      string
		message     string
		counts      cairnv1.InstanceCounts
	}{{
		name:    "every instance ready",
		results: []InstanceResult{ready("team-b", "cache"), ready("team-a", "web"), {Namespace: "team-a", Name: "gone", Action: outcome.ActionDeleted}},
		ready:   metav1.ConditionTrue, reason: cairnv1.ReasonSucceeded, message: "2 instances synced at 0123456789ab",
		counts: cairnv1.InstanceCounts{Total: 2, Ready: 2},
	}, {
		name:    "an invalid declaration fails the sync",
		results: []InstanceResult{ready("team-b", "cache"), ready("team-a", "web")},
		invalid: []*declarations.Error{invalid},
		ready:   metav1.ConditionFalse, reason: "InstancesFailed", message: "1 of 3 instances are not ready at 0123456789ab",
		counts: cairnv1.InstanceCounts{Total: 3, Ready: 2, Failed: 1},
	}, {
		name: "progressing, none failed",
		results: []InstanceResult{ready("team-b", "cache"),
			{Namespace: "team-a", Name: "web", Action: outcome.ActionProgressing}},
		ready: metav1.ConditionUnknown, reason: cairnv1.ReasonProgressing,
		message: "1 of 2 instances are progressing at 0123456789ab (applied, not yet healthy)",
		counts:  cairnv1.InstanceCounts{Total: 2, Ready: 1, Progressing: 1},
	}, {
		name: "failed and progressing: failed",
		results: []InstanceResult{{Namespace: "team-b", Name: "cache", Action: outcome.ActionFailed},
			{Namespace: "team-a", Name: "web", Action: outcome.ActionProgressing}},
		ready: metav1.ConditionFalse, reason: "InstancesFailed", message: "1 of 2 instances are not ready at 0123456789ab",
		counts: cairnv1.InstanceCounts{Total: 2, Failed: 1, Progressing: 1},
	}, {
		name:        "interrupted",
		results:     []InstanceResult{ready("team-b", "cache"), {Namespace: "team-a", Name: "web", Action: outcome.ActionFailed}},
		interrupted: true,
		ready:       metav1.ConditionFalse, reason: cairnv1.ReasonInterrupted,
		message: "the sync of 0123456789ab was interrupted (context canceled) with 1 of 2 instances not finished",
		counts:  cairnv1.InstanceCounts{Total: 2, Ready: 1, Failed: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &cairnv1.Platform{ObjectMeta: metav1.ObjectMeta{Name: cairnv1.PlatformName,
				Annotations: map[string]string{cairnv1.ReconcileRequestAnnotation: "2026-12-01T09:59:00Z"}}}
			p.Status.LastSyncedRevision = "old"
			conditions.MarkStalled(p, cairnv1.ReasonInvalidDeclaration, "the last revision could not be used")
			c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(p).WithStatusSubresource(p).Build()
			rep := &recordingReporter{instances: map[report.InstanceKey]InstanceResult{}}
			s := &RevisionState{
				revisionInput: revisionInput{e: &Engine{cluster: &Cluster{client: c}, opts: Options{Repository: "https://git.example.com/platform", Reporter: rep}},
					rev: Revision{SHA: sha}, now: now, platform: p.DeepCopy(), set: &declarations.Set{Invalid: tc.invalid}},
				verdicts: verdicts{results: tc.results}}
			ctx := context.Background()
			if tc.interrupted {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}

			res, err := s.finish(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Interrupted).To(Equal(tc.interrupted))
			g.Expect(rep.finished).To(BeIdenticalTo(res))
			var keys []string
			for _, i := range res.Instances {
				keys = append(keys, i.Namespace+"/"+i.Name)
			}
			g.Expect(slices.IsSorted(keys)).To(BeTrue(), "sorted by namespace/name: %v", keys)

			var got cairnv1.Platform
			g.Expect(c.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &got)).To(Succeed())
			g.Expect(got.Status.LastAttemptedRevision).To(Equal(sha))
			g.Expect(got.Status.Repository).To(Equal("https://git.example.com/platform"))
			g.Expect(got.Status.Instances).To(Equal(tc.counts))
			cond := conditions.Get(&got, "Ready")
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(tc.ready))
			g.Expect(cond.Reason).To(Equal(tc.reason))
			g.Expect(cond.Message).To(Equal(tc.message))
			g.Expect(conditions.Has(&got, "Stalled")).To(BeFalse(), "the revision could be used")
			if tc.interrupted {
				g.Expect(got.Status.LastSyncedRevision).To(Equal("old"), "an interrupted sync is no sync")
				g.Expect(got.Status.LastHandledReconcileAt).To(BeEmpty(), "the request is handled by the next sync")
				g.Expect(got.Status.LastSyncTime).To(BeNil())
			} else {
				g.Expect(got.Status.LastSyncedRevision).To(Equal(sha))
				g.Expect(got.Status.LastHandledReconcileAt).To(Equal("2026-12-01T09:59:00Z"))
				g.Expect(got.Status.LastSyncTime).NotTo(BeNil())
				g.Expect(got.Status.LastSyncTime.Time).To(BeTemporally("==", now))
			}
			for _, inv := range tc.invalid {
				ns, name := splitKey(inv.Object)
				reported := rep.instances[report.InstanceKey{Namespace: ns, Name: name}]
				g.Expect(reported.Action).To(Equal(outcome.ActionFailed))
				g.Expect(reported.Reason).To(Equal(inv.Reason))
				g.Expect(reported.Message).To(Equal(inv.Error()))
				for _, i := range res.Instances {
					if i.Namespace == ns && i.Name == name {
						g.Expect(i.NextRetryAt).To(HaveValue(Equal(now.Add(status.StalledRecheck))), "checked again after the stalled recheck")
					}
				}
			}
		})
	}
}

// TestFailRevisionRecordsAnUnusableRevision: a revision whose declarations cannot
// be used marks the Platform stalled and changes nothing else; it is retried after
// the stalled recheck, a source that could not be fetched after the transient backoff.
func TestFailRevisionRecordsAnUnusableRevision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    func(ctx context.Context, e *Engine) (*SyncResult, error)
		sha     string
		reason  string
		message string
		retryIn time.Duration
	}{
		{name: "declarations that do not load", sha: "abc",
			fail: func(ctx context.Context, e *Engine) (*SyncResult, error) {
				return e.failRevision(ctx, Revision{SHA: "abc"},
					outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, errors.New("platform.yaml:3: unknown field")))
			},
			reason: cairnv1.ReasonInvalidDeclaration, message: "platform.yaml:3: unknown field", retryIn: status.StalledRecheck},
		{name: "a source that cannot be read, no head resolved", sha: "",
			fail: func(ctx context.Context, e *Engine) (*SyncResult, error) {
				e.RecordSourceFailure(ctx, "", errors.New("repository not found"))
				return nil, nil
			},
			reason: cairnv1.ReasonSourceFailed, message: "repository not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &cairnv1.Platform{ObjectMeta: metav1.ObjectMeta{Name: cairnv1.PlatformName}}
			p.Status.LastSyncedRevision, p.Status.LastAttemptedRevision = "old", "old"
			c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(p).WithStatusSubresource(p).Build()
			rep := &recordingReporter{instances: map[report.InstanceKey]InstanceResult{}}
			e := &Engine{cluster: &Cluster{client: c}, opts: Options{Reporter: rep}}
			before := time.Now()
			res, err := tc.fail(context.Background(), e)
			g.Expect(err).NotTo(HaveOccurred())
			if res != nil {
				g.Expect(res.Failed()).To(BeTrue())
				g.Expect(res.Instances).To(BeEmpty())
				g.Expect(res.NextRetry()).To(BeTemporally("~", before.Add(tc.retryIn), 5*time.Second))
				g.Expect(rep.finished).To(BeIdenticalTo(res), "reported on the forge")
			}

			var got cairnv1.Platform
			g.Expect(c.Get(context.Background(), client.ObjectKey{Name: cairnv1.PlatformName}, &got)).To(Succeed())
			g.Expect(got.Status.LastSyncedRevision).To(Equal("old"))
			want := tc.sha
			if want == "" {
				want = "old" // no head: nothing attempted
			}
			g.Expect(got.Status.LastAttemptedRevision).To(Equal(want))
			g.Expect(conditions.IsFalse(&got, "Ready")).To(BeTrue())
			g.Expect(conditions.GetReason(&got, "Ready")).To(Equal(tc.reason))
			g.Expect(conditions.GetMessage(&got, "Ready")).To(ContainSubstring(tc.message))
			g.Expect(conditions.IsTrue(&got, "Stalled")).To(BeTrue())
		})
	}
}

// TestMarkInvalidWritesOverTheCRAsItIsNow: the revision step records an invalid
// declaration on its instance's CR as the API server holds it, not as a view a moment
// behind (a sharded sync's informer cache) held it: the conditions a replica wrote
// since stay, and the failures are counted from the last one.
func TestMarkInvalidWritesOverTheCRAsItIsNow(t *testing.T) {
	g := NewWithT(t)
	now := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web",
		Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}}}
	now.Status.Failures = 2
	conditions.MarkTrue(now, cairnv1.VerifiedCondition, cairnv1.ReasonSucceeded, "verified")
	seen := now.DeepCopy() // the cache, before the replica's last write
	seen.Status = cairnv1.ModuleInstanceStatus{}
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(now).WithStatusSubresource(now).Build()
	s := &RevisionState{revisionInput: revisionInput{e: &Engine{cluster: &Cluster{client: c}}, rev: Revision{SHA: "abc"}, now: time.Now(),
		set: &declarations.Set{Invalid: []*declarations.Error{{Reason: cairnv1.ReasonInvalidDeclaration, Kind: cairnv1.ModuleInstanceKind,
			Object: "team-a/web", Message: "bad"}}}},
		clusterView: clusterView{live: map[string]*cairnv1.ModuleInstance{"team-a/web": seen}}}

	s.markInvalid(context.Background())

	var got cairnv1.ModuleInstance
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(now), &got)).To(Succeed())
	g.Expect(conditions.IsFalse(&got, "Ready")).To(BeTrue())
	g.Expect(conditions.IsTrue(&got, cairnv1.VerifiedCondition)).To(BeTrue(), "the replica's condition stays")
	g.Expect(got.Status.Failures).To(BeEquivalentTo(3))
}

// TestRecordSync: each sync of a revision is recorded newest first, at most
// MaxRecentSyncs, counting the instances affected or removed, failed, refused by
// the prune guards and warned.
func TestRecordSync(t *testing.T) {
	g := NewWithT(t)
	p := &cairnv1.Platform{}
	res := &SyncResult{Instances: []InstanceResult{
		{Action: outcome.ActionCreated, Applied: 2},
		{Action: outcome.ActionDeleted},
		{Action: outcome.ActionUnchanged, Warnings: []string{"catalog skew"}},
		{Action: outcome.ActionFailed, Reason: cairnv1.ReasonPruneGuard},
		{Action: outcome.ActionFailed, Reason: cairnv1.ReasonRenderFailed},
	}}
	for i := range cairnv1.MaxRecentSyncs + 2 {
		recordSync(p, fmt.Sprintf("rev-%d", i), time.Now().Add(-time.Second), "InstancesFailed", res, 3)
	}
	g.Expect(p.Status.RecentSyncs).To(HaveLen(cairnv1.MaxRecentSyncs))
	r := p.Status.RecentSyncs[0]
	g.Expect(r.Revision).To(Equal(fmt.Sprintf("rev-%d", cairnv1.MaxRecentSyncs+1)), "newest first")
	g.Expect(r.Duration.Duration).To(BeNumerically(">=", time.Second))
	g.Expect([]int32{r.Changed, r.Failed, r.PruneGuard, r.Warnings}).To(Equal([]int32{4, 2, 1, 1}), "3 affected and 1 removed")
}

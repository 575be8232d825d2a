package reconciler

import (
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func changeSet(actions ...ssa.Action) *ssa.ChangeSet {
	cs := &ssa.ChangeSet{}
	for _, a := range actions {
		cs.Add(ssa.ChangeSetEntry{Action: a})
	}
	return cs
}

// TestInstanceResultReportsWhatTheSyncDid: the result of an instance's sync, its
// Ready message and its line of progress say what was applied, pruned, generated
// and kept, and end with the warnings; a failure says its reason.
func TestInstanceResultReportsWhatTheSyncDid(t *testing.T) {
	now := time.Now()
	objects := func(n int) []*unstructured.Unstructured { return make([]*unstructured.Unstructured, n) }
	for _, tc := range []struct {
		name    string
		run     func(r *instanceRun)
		action  outcome.Action
		reason  string
		message string // of the result; also the Ready message of a success, less its warnings
		outcome string // the line of progress
		counts  [4]int // applied, unchanged, created, pruned
	}{{
		name: "applied: changed and unchanged objects counted",
		run: func(r *instanceRun) {
			r.objects = objects(4)
			r.applied = changeSet(ssa.CreatedAction, ssa.ConfiguredAction, ssa.UnchangedAction, ssa.UnchangedAction)
		},
		action: outcome.ActionUpdated, reason: cairnv1.ReasonSucceeded,
		message: "4 objects applied (2 changed, 2 unchanged)",
		counts:  [4]int{2, 2, 1, 0},
	}, {
		name: "the first success creates",
		run: func(r *instanceRun) {
			r.live.Status.History = r.live.Status.History[:1]
			r.objects, r.applied = objects(1), changeSet(ssa.CreatedAction)
		},
		action: outcome.ActionCreated, reason: cairnv1.ReasonSucceeded,
		message: "1 objects applied (1 changed, 0 unchanged)",
		counts:  [4]int{1, 0, 1, 0},
	}, {
		name: "pruned objects, generated Secrets, hooks and protected objects kept",
		run: func(r *instanceRun) {
			r.objects, r.applied = objects(2), changeSet(ssa.UnchangedAction, ssa.UnchangedAction)
			r.pruned = changeSet(ssa.DeletedAction, ssa.DeletedAction, ssa.SkippedAction)
			r.secrets = []*secretDecl{
				{spec: cairnv1.GeneratedSecret{Name: "db-pass"}, targets: []*secretTarget{{action: secretKeep}, {action: secretCreate}}},
				{spec: cairnv1.GeneratedSecret{Name: "api-key"}, targets: []*secretTarget{{action: secretRotate}}},
			}
			r.hooksRan = []string{"pre/migrate", "post/smoke"}
			r.prune = &pruneSet{kept: []string{"_team-a-data__Namespace"}}
		},
		action: outcome.ActionUpdated, reason: cairnv1.ReasonSucceeded,
		message: "2 objects applied (0 changed, 2 unchanged), 2 pruned; generated Secrets: db-pass created, api-key rotated; " +
			"hooks run: pre/migrate, post/smoke; kept 1 object(s) of protected kinds: [_team-a-data__Namespace]",
		counts: [4]int{0, 2, 0, 2},
	}, {
		name: "a CRD kept for its users: ContractWithdrawn",
		run: func(r *instanceRun) {
			r.objects, r.applied = objects(1), changeSet(ssa.UnchangedAction)
			r.withheld = inv("_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition")
		},
		action: outcome.ActionUpdated, reason: cairnv1.ReasonContractWithdrawn,
		message: "1 objects applied (0 changed, 1 unchanged)",
		counts:  [4]int{0, 1, 0, 0},
	}, {
		name: "warnings end the Ready message",
		run: func(r *instanceRun) {
			r.objects, r.applied = objects(1), changeSet(ssa.ConfiguredAction)
			r.warnings = []string{"first", "second"}
		},
		action: outcome.ActionUpdated, reason: cairnv1.ReasonSucceeded,
		message: "1 objects applied (1 changed, 0 unchanged)",
		outcome: "ready: 1 objects applied (1 changed, 0 unchanged); warnings: first; second",
		counts:  [4]int{1, 0, 0, 0},
	}, {
		name: "a failure after part of the apply",
		run: func(r *instanceRun) {
			r.objects, r.applied = objects(3), changeSet(ssa.CreatedAction)
			r.failure = outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("conflict on Deployment/team-a/web"))
			markFailed(r.live, "new", r.failure, now)
		},
		action: outcome.ActionFailed, reason: cairnv1.ReasonApplyFailed,
		message: "conflict on Deployment/team-a/web",
		outcome: "failed (ApplyFailed): conflict on Deployment/team-a/web",
		counts:  [4]int{1, 0, 1, 0},
	}, {
		name: "applied, not yet healthy",
		run: func(r *instanceRun) {
			r.objects, r.applied = objects(1), changeSet(ssa.ConfiguredAction)
			r.failure = &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: errors.New("applied; waiting for 1 of 1 object(s)")}
			markFailed(r.live, "new", r.failure, now)
		},
		action: outcome.ActionProgressing, reason: cairnv1.ReasonProgressing,
		message: "applied; waiting for 1 of 1 object(s)",
		outcome: "progressing: applied; waiting for 1 of 1 object(s)",
		counts:  [4]int{1, 0, 0, 0},
	}, {
		name: "unaffected: why, and a rotation of its generated Secrets",
		run: func(r *instanceRun) {
			r.affected, r.why, r.secretNote = false, "unchanged", "; generated Secrets: api-key rotated"
		},
		action:  outcome.ActionUnchanged,
		message: "unchanged; generated Secrets: api-key rotated",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			live := mi.DeepCopy()
			markSucceeded(live, "old", cairnv1.ReasonSucceeded, "ok", now.Add(-time.Hour))
			markSucceeded(live, "old", cairnv1.ReasonSucceeded, "ok", now.Add(-time.Minute))
			r := &instanceRun{mi: mi, live: live, affected: true}
			tc.run(r)

			res := r.result()
			g.Expect(res.Action).To(Equal(tc.action))
			g.Expect(res.Reason).To(Equal(tc.reason))
			g.Expect(res.Message).To(Equal(tc.message))
			g.Expect([4]int{res.Applied, res.Unchanged, res.Created, res.Pruned}).To(Equal(tc.counts), "applied, unchanged, created, pruned")
			g.Expect(res.Warnings).To(Equal(r.warnings))
			if tc.outcome == "" {
				tc.outcome = "ready: " + tc.message
			}
			if tc.action != outcome.ActionUnchanged {
				g.Expect(r.outcome()).To(Equal(tc.outcome))
			}
			if r.failure == nil && r.affected {
				g.Expect(r.readyMessage()).To(Equal(r.summary() + warningNote(r.warnings)))
				g.Expect(res.NextRetryAt).To(BeNil())
			} else if r.failure != nil {
				g.Expect(res.NextRetryAt).To(HaveValue(Equal(live.Status.NextRetryAt.Time)), "says when it is retried")
			}
		})
	}
}

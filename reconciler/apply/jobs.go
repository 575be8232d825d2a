package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// Per-kind rules for Jobs (docs/sync.md, "The steps"): a Job is applied once and
// not updated after it ran; a changed Job is recreated only when it is annotated
// cairn.dev/force: "true"; a finished Job that its TTL (ttlSecondsAfterFinished)
// removed is not created again. "Cairn applied this Job" is recorded by its inventory
// entry carrying a hash (the hash of what was applied), so it survives restarts and
// needs no extra state.

// jobAction is what an apply does with a rendered Job that changed.
type jobAction string

const (
	jobApply    jobAction = "apply"    // create it, or update a Job that has not started
	jobKeep     jobAction = "keep"     // leave it as it ran (or gone, after its TTL)
	jobRecreate jobAction = "recreate" // delete and create it again (forced)
)

// IsJob tells whether u is a Job of batch.
func IsJob(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "batch" && gvk.Kind == "Job"
}

// JobApplied reports whether the inventory records that cairn applied the Job.
func JobApplied(inv Inventory, u *unstructured.Unstructured) bool {
	e, ok := inv[ObjectID(u)]
	return ok && e.Hash != ""
}

// decideJob is the rule for a changed Job: live is the Job in the cluster (nil when
// it does not exist), applied says whether cairn applied it before.
func decideJob(applied bool, live *unstructured.Unstructured, force bool) jobAction {
	switch {
	case live != nil && jobStarted(live) && force:
		return jobRecreate
	case live != nil && jobStarted(live):
		return jobKeep
	case live == nil && applied && !force:
		return jobKeep
	}
	return jobApply
}

// jobStarted reports whether a Job has started or finished.
func jobStarted(live *unstructured.Unstructured) bool {
	if _, ok, _ := unstructured.NestedString(live.Object, "status", "startTime"); ok {
		return true
	}
	for _, field := range []string{"active", "succeeded", "failed"} {
		if n, _, _ := unstructured.NestedInt64(live.Object, "status", field); n > 0 {
			return true
		}
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	return len(conds) > 0
}

// settleJobs applies the Job rules to the changed Jobs among objects before anything
// is written: it keeps (records as unchanged, with a note) the Jobs that ran, and
// returns the objects still to apply and the forced Jobs to recreate after them.
func settleJobs(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, last Inventory,
	key []byte, rep *Report) (rest, recreates []*unstructured.Unstructured, err error) {
	for _, u := range objects {
		if !IsJob(u) || unchangedSince(last, u, key) {
			rest = append(rest, u)
			continue
		}
		live, err := GetLive(ctx, c, u)
		if err != nil {
			return nil, nil, outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to read the Job: %w", Describe(u), err))
		}
		switch decideJob(JobApplied(last, u), live, Forced(u)) {
		case jobApply:
			rest = append(rest, u)
		case jobKeep:
			rep.add(u, ssa.UnchangedAction)
			rep.Notes = append(rep.Notes, keptJobNote(u, live))
		case jobRecreate:
			recreates = append(recreates, u)
		}
	}
	return rest, recreates, nil
}

// recreateJobs deletes and creates again the forced Jobs that ran, so they run again.
func recreateJobs(ctx context.Context, c client.Client, jobs []*unstructured.Unstructured, rep *Report) error {
	for _, u := range jobs {
		live, err := Recreate(ctx, c, u)
		if err != nil {
			return err
		}
		rep.Applied[ObjectID(u)] = true
		rep.Live = append(rep.Live, live)
		rep.add(u, ssa.ConfiguredAction)
	}
	return nil
}

func keptJobNote(u, live *unstructured.Unstructured) string {
	if live == nil {
		return fmt.Sprintf("%s ran and is gone (ttlSecondsAfterFinished): not created again; annotate it %s: \"true\" to run it again",
			Describe(u), cairnv1.ForceAnnotation)
	}
	return fmt.Sprintf("%s has run: left as it is, not updated; annotate it %s: \"true\" to recreate it",
		Describe(u), cairnv1.ForceAnnotation)
}

// unchangedSince reports whether u's hash and version equal its inventory entry.
func unchangedSince(last Inventory, u *unstructured.Unstructured, key []byte) bool {
	e, ok := last[ObjectID(u)]
	return ok && e.Hash == ObjectHash(u, key) && e.Version == u.GetAPIVersion()
}

// GetLive reads the live object of u; nil when it does not exist.
func GetLive(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

// WithoutAppliedJobs leaves out of a drift check the Jobs cairn applied: a Job that
// ran is not corrected, and one its TTL removed is not created again.
func WithoutAppliedJobs(objects []*unstructured.Unstructured, inv Inventory) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objects))
	for _, u := range objects {
		if !IsJob(u) || !JobApplied(inv, u) {
			out = append(out, u)
		}
	}
	return out
}

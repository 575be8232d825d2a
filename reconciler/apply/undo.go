package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// The first apply stage (CRDs, Namespaces, cluster roles) is written before the rest
// of a change is validated when some of the rest cannot be dry-run without it: an
// object in a Namespace the stage creates or changes, or of a kind a CRD of the stage
// defines (see splitByDefinitions). The API server validates those objects only once
// the stage is written, so when one of them fails its dry-run, the stage is taken
// back: what it created is deleted and what it changed is given its previous state,
// so that nothing of the change stays written. The API server stays the one
// validator (schema, CEL rules, admission, quotas, RBAC in the new namespace).

// priorState holds, by object id, the live state before the first stage was written
// of each object of that stage: nil for an object that did not exist.
type priorState map[string]*unstructured.Unstructured

// readPrior reads the objects of the first stage before it is written.
func readPrior(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) (priorState, error) {
	prior := make(priorState, len(objects))
	var mu sync.Mutex
	errs := ForEach(objects, Concurrency, func(u *unstructured.Unstructured) error {
		live, err := GetLive(ctx, c, u)
		if err != nil {
			return outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to read before applying: %w", Describe(u), err))
		}
		mu.Lock()
		defer mu.Unlock()
		prior[ObjectID(u)] = live
		return nil
	})
	if f := joinFailures(errs); f != nil {
		return nil, f
	}
	return prior, nil
}

// undoFirstStage takes back what the first stage wrote (rep's responses to the objects
// of prior) after cause, the failed validation of the rest: see undoOne. The objects
// taken back leave rep; those that could not be stay in it, named in the error. The
// returned error is cause with what was done. An interrupted sync still takes the
// stage back (see Finishing).
func undoFirstStage(ctx context.Context, c client.Client, prior priorState, rep *Report, cause error) error {
	ctx, cancel := Finishing(ctx)
	defer cancel()
	var written []*unstructured.Unstructured
	for _, live := range rep.Live {
		if _, ok := prior[ObjectID(live)]; ok {
			written = append(written, live)
		}
	}
	var mu sync.Mutex
	undone := map[string]bool{}
	errs := ForEach(written, Concurrency, func(live *unstructured.Unstructured) error {
		if err := undoOne(ctx, c, prior[ObjectID(live)], live); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		undone[ObjectID(live)] = true
		return nil
	})
	rep.forget(undone)
	f := asFailure(cause)
	if len(errs) > 0 {
		f.Err = fmt.Errorf("%w; failed to take back what was written to validate it: %w", f.Err, errors.Join(errs...))
		return f
	}
	rep.Untouched = true
	if len(written) > 0 {
		f.Err = fmt.Errorf("%w; written first to validate the rest and taken back: %s", f.Err, describeAll(written))
	}
	return f
}

// undoOne takes back one object of the first stage: one that did not exist before
// (before is nil) is deleted, by its UID so that only the object this sync created
// goes; one that existed is updated back to its state before (spec, labels,
// annotations and managed fields), never deleted.
func undoOne(ctx context.Context, c client.Client, before, after *unstructured.Unstructured) error {
	if before == nil {
		uid := after.GetUID()
		err := c.Delete(ctx, after.DeepCopy(), client.Preconditions{UID: &uid},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: failed to delete what this sync created: %w", Describe(after), err)
		}
		return nil
	}
	restored := before.DeepCopy()
	restored.SetResourceVersion(after.GetResourceVersion())
	if err := c.Update(ctx, restored, client.FieldOwner(cairnv1.FieldManager)); err != nil {
		return fmt.Errorf("%s: failed to restore its state before this sync: %w", Describe(after), err)
	}
	return nil
}

// forget drops the objects of ids from what the apply did.
func (r *Report) forget(ids map[string]bool) {
	if len(ids) == 0 {
		return
	}
	for id := range ids {
		delete(r.Applied, id)
	}
	r.Live = slices.DeleteFunc(r.Live, func(u *unstructured.Unstructured) bool { return ids[ObjectID(u)] })
	kept := ssa.NewChangeSet()
	for _, e := range r.Changes.Entries {
		if !ids[e.ObjMetadata.String()] {
			kept.Add(e)
		}
	}
	r.Changes = kept
}

// asFailure is err as a Failure (a stalled ApplyFailed one when it is none), copied
// so that its message can be extended.
func asFailure(err error) *outcome.Failure {
	var f *outcome.Failure
	if errors.As(err, &f) {
		c := *f
		return &c
	}
	return outcome.NewStalled(cairnv1.ReasonApplyFailed, err)
}

func describeAll(objects []*unstructured.Unstructured) string {
	names := make([]string, len(objects))
	for i, u := range objects {
		names[i] = Describe(u)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

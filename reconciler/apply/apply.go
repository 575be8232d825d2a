package apply

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// Concurrency bounds the apply requests of one instance in flight at once.
const Concurrency = 16

// Report is what an apply did, object by object.
type Report struct {
	// Changes says what was done to each object (created, configured, unchanged).
	Changes *ssa.ChangeSet
	// Applied holds the ids that the API server accepted in this apply.
	Applied map[string]bool
	// Live holds the API server's responses to the applies, for the health check.
	Live []*unstructured.Unstructured
	// Notes say which objects the per-kind rules left alone (a Job that ran).
	Notes []string
	// Untouched: the apply failed having left nothing written (its validation failed
	// before the first write, or what it wrote to validate the rest was taken back).
	Untouched bool
}

// Objects server-side applies the objects whose hash (under key) differs from the
// last inventory, one request each (no GET): CRDs, Namespaces and cluster roles first,
// waited on, then the rest. When two or more objects changed, they are validated by
// a server-side dry-run before the first write (see dryRunStage), those that need a
// Namespace or CRD of the first stage right after that stage, which is taken back
// when they fail (see applyFirstStage); one changed object is applied directly, its
// apply being atomic; the objects whose ids valid holds passed the same dry-run since
// the caller built them (see DryRun) and are not sent again. Unchanged objects cost nothing; drift on them is
// found by the separate drift check. An immutable-field change is refused unless the
// object is annotated cairn.dev/force: "true", in which case it is recreated. Jobs
// follow their own rules first (see settleJobs). The first stage is waited on for at
// most timeout. The report says what was written even when an error is returned.
func Objects(ctx context.Context, m *ssa.ResourceManager, objects []*unstructured.Unstructured,
	last Inventory, key []byte, timeout time.Duration, valid map[string]bool) (*Report, error) {
	rep := &Report{Changes: ssa.NewChangeSet(), Applied: map[string]bool{}}
	objects, recreates, err := settleJobs(ctx, m.Client(), objects, last, key, rep)
	if err != nil {
		return rep, err
	}
	var first, rest []*unstructured.Unstructured
	for _, u := range objects {
		if unchangedSince(last, u, key) {
			rep.add(u, ssa.UnchangedAction)
			continue
		}
		if ssautils.IsClusterDefinition(u) {
			first = append(first, u)
		} else {
			rest = append(rest, u)
		}
	}
	validate := len(first)+len(rest)+len(recreates) >= 2
	early, later := splitByDefinitions(first, rest)
	earlyJobs, laterJobs := splitByDefinitions(first, recreates)
	if validate {
		if err := dryRunStage(ctx, m.Client(), slices.Concat(unvalidated(first, valid), unvalidated(early, valid), earlyJobs)); err != nil {
			rep.Untouched = true
			return rep, err
		}
	}
	if err := applyFirstStage(ctx, m.Client(), first, slices.Concat(later, laterJobs), validate, last, rep, timeout); err != nil {
		return rep, err
	}
	if err := applyStage(ctx, m.Client(), rest, last, rep); err != nil {
		return rep, err
	}
	return rep, recreateJobs(ctx, m.Client(), recreates, rep)
}

// applyFirstStage writes the first stage and waits until it is established. When
// later, which could not be dry-run before it, is to be validated, it is dry-run then,
// before any of the rest is written; when that fails (or the stage is not
// established), the stage is taken back (see undoFirstStage), so that nothing of the
// change stays written.
func applyFirstStage(ctx context.Context, c client.Client, first, later []*unstructured.Unstructured, validate bool,
	last Inventory, rep *Report, timeout time.Duration) error {
	var prior priorState
	if validate && len(first) > 0 && len(later) > 0 {
		var err error
		if prior, err = readPrior(ctx, c, first); err != nil {
			return err
		}
	}
	if err := applyStage(ctx, c, first, last, rep); err != nil {
		return err
	}
	var err error
	if err = WaitHealthy(ctx, c, nil, rep.Live, timeout); err != nil {
		err = outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf("definitions not established: %w", err))
	} else if prior != nil {
		err = dryRunAfterDefinitions(ctx, c, first, later, prior)
	}
	if err != nil && prior != nil {
		return undoFirstStage(ctx, c, prior, rep, err)
	}
	return err
}

func (r *Report) add(u *unstructured.Unstructured, action ssa.Action) {
	r.Changes.Add(ssa.ChangeSetEntry{
		ObjMetadata: object.UnstructuredToObjMetadata(u), GroupVersion: u.GroupVersionKind().GroupVersion().String(),
		Subject: ssautils.FmtUnstructured(u), Action: action,
	})
}

// applyStage applies objects concurrently; every object is tried, and the errors of
// all that failed are returned together, each naming its object.
func applyStage(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, last Inventory,
	rep *Report) error {
	var mu sync.Mutex
	errs := ForEach(objects, Concurrency, func(u *unstructured.Unstructured) error {
		live, err := applyOne(ctx, c, u)
		if err != nil {
			return err
		}
		live.SetManagedFields(nil) // the health check and a take-back read neither; often half a response
		mu.Lock()
		defer mu.Unlock()
		rep.Applied[ObjectID(u)] = true
		rep.Live = append(rep.Live, live)
		rep.add(u, actionFor(u, last))
		return nil
	})
	if f := joinFailures(errs); f != nil {
		return f
	}
	return nil
}

// joinFailures reports every failed object in one Failure: stalled when any failure
// stalls (a retry would not help it), else transient.
func joinFailures(errs []error) *outcome.Failure {
	if len(errs) == 0 {
		return nil
	}
	kind := outcome.Transient
	reason := cairnv1.ReasonApplyFailed
	for _, err := range errs {
		var f *outcome.Failure
		if errors.As(err, &f) && f.Kind == outcome.Stalled {
			kind, reason = outcome.Stalled, f.Reason
		}
	}
	return &outcome.Failure{Kind: kind, Reason: reason, Err: errors.Join(errs...)}
}

func actionFor(u *unstructured.Unstructured, last Inventory) ssa.Action {
	if _, ok := last[ObjectID(u)]; ok {
		return ssa.ConfiguredAction
	}
	return ssa.CreatedAction
}

// applyOne sends one server-side apply request, forcing ownership of cairn's fields,
// and returns the API server's response.
func applyOne(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live, err := PatchApply(ctx, c, u)
	if err == nil {
		return live, nil
	}
	if isImmutable(err) && Forced(u) {
		return Recreate(ctx, c, u)
	}
	return nil, applyFailure(u, "apply", err)
}

// Forced reports whether u may be recreated when a change needs it.
func Forced(u *unstructured.Unstructured) bool {
	return u.GetAnnotations()[cairnv1.ForceAnnotation] == "true"
}

// applyFailure types the API server's refusal of u's apply (or its dry-run, step).
func applyFailure(u *unstructured.Unstructured, step string, err error) error {
	if isImmutable(err) {
		return outcome.NewStalled(cairnv1.ReasonApplyFailed, fmt.Errorf(
			"%s: %w (the change needs the object to be recreated: annotate it with %s: \"true\" to let cairn do so)",
			Describe(u), err, cairnv1.ForceAnnotation))
	}
	if isTypeMismatch(err) {
		return outcome.NewStalled(cairnv1.ReasonApplyFailed, fmt.Errorf("%s %s failed: %w", Describe(u), step, err))
	}
	return outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s %s failed: %w", Describe(u), step, err))
}

// isTypeMismatch reports the API server's answer to an apply with a field of the
// wrong type for the kind's schema: an internal error ("failed to create typed patch
// object (...): .spec.size: expected numeric (int or float), got string"), which no
// retry mends.
func isTypeMismatch(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed to create typed patch object")
}

// PatchApply sends cairn's server-side apply of u (field manager cairn, forced
// ownership) with extra options (client.DryRunAll for the validation before writes).
func PatchApply(ctx context.Context, c client.Client, u *unstructured.Unstructured,
	extra ...client.PatchOption) (*unstructured.Unstructured, error) {
	obj := u.DeepCopy()
	opts := append([]client.PatchOption{client.ForceOwnership, client.FieldOwner(cairnv1.FieldManager)}, extra...)
	//nolint:staticcheck // a server-side apply patch of an unstructured object
	err := c.Patch(ctx, obj, client.Apply, opts...)
	return obj, err
}

var immutablePattern = regexp.MustCompile(`field is immutable|is immutable|immutable field`)

func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && immutablePattern.MatchString(err.Error())
}

// Recreate deletes the object, waits until it is gone, and applies it again.
func Recreate(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	live := u.DeepCopy()
	err := c.Delete(ctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to delete for recreation: %w", Describe(u), err))
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to wait for deletion: %w", Describe(u), err))
	}
	live, err = PatchApply(ctx, c, u)
	if err != nil {
		return nil, applyFailure(u, "apply", err)
	}
	return live, nil
}

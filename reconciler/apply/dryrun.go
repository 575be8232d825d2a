package apply

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cairn.dev/cairn/internal/crds"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// dryRunStage validates objects with a server-side dry-run of the same apply patch
// (same field manager, forced ownership), all of them, before any is written. When
// one fails, the error names every object that failed with the API server's message,
// and the caller writes nothing of the stage. An immutable-field change of an object
// annotated cairn.dev/force passes: its apply recreates it.
func dryRunStage(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) error {
	if len(objects) == 0 {
		return nil
	}
	errs := ForEach(objects, Concurrency, func(u *unstructured.Unstructured) error {
		_, err := PatchApply(ctx, c, u, client.DryRunAll)
		if err == nil || (isImmutable(err) && Forced(u)) {
			return nil
		}
		return applyFailure(u, "dry-run", err)
	})
	f := joinFailures(errs)
	if f == nil {
		return nil
	}
	f.Err = fmt.Errorf("validation before writing failed, nothing of it was written: %w", f.Err)
	return f
}

// DryRun validates u by a server-side dry-run of its apply patch, the one dryRunStage
// sends, and says whether u exists: the API server stores nothing on a dry-run, so
// its answer for an object that does not exist carries no resourceVersion, while that
// for an existing object carries the object's current one. The ownership check asks
// this in place of a read (the validation's answer tells what the read would, issue
// 24), reads only the objects that exist, and hands the objects that passed to
// Objects as validated, so that none is dry-run twice.
func DryRun(ctx context.Context, c client.Client, u *unstructured.Unstructured) (exists bool, err error) {
	out, err := PatchApply(ctx, c, u, client.DryRunAll)
	if err != nil {
		return false, err
	}
	return out.GetResourceVersion() != "", nil
}

// unvalidated leaves out the objects whose ids valid holds.
func unvalidated(objects []*unstructured.Unstructured, valid map[string]bool) []*unstructured.Unstructured {
	if len(valid) == 0 {
		return objects
	}
	out := make([]*unstructured.Unstructured, 0, len(objects))
	for _, u := range objects {
		if !valid[ObjectID(u)] {
			out = append(out, u)
		}
	}
	return out
}

// splitByDefinitions splits the objects of the second apply stage into those that can
// be dry-run before the first stage is written and those that cannot: objects in a
// Namespace, or of a kind defined by a CRD, that the first stage creates or changes.
// Those are dry-run after the first stage is applied and established, before any of
// the second stage is written; when one fails, the first stage is taken back (see
// undoFirstStage).
func splitByDefinitions(first, rest []*unstructured.Unstructured) (early, later []*unstructured.Unstructured) {
	namespaces := map[string]bool{}
	for _, u := range first {
		if u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "" {
			namespaces[u.GetName()] = true
		}
	}
	kinds := crds.Scopes(first)
	for _, u := range rest {
		if _, defined := kinds[schema.GroupKind{Group: u.GroupVersionKind().Group, Kind: u.GetKind()}]; defined || namespaces[u.GetNamespace()] {
			later = append(later, u)
		} else {
			early = append(early, u)
		}
	}
	return early, later
}

// schemaSettle bounds how long the dry-run of objects of a kind whose CRD was just
// written is tried again while it fails: the API server serves a CRD's new schema a
// moment after the write, and no condition tells when (Established stays True).
const schemaSettle = 5 * time.Second

// dryRunAfterDefinitions dry-runs later once first is written; when first changed a
// CRD that existed (prior holds it) and the dry-run fails, it is tried again until it
// passes or schemaSettle has passed, so that no object is judged by the schema its CRD
// had before. A new CRD serves its schema once Established.
func dryRunAfterDefinitions(ctx context.Context, c client.Client, first, later []*unstructured.Unstructured,
	prior priorState) error {
	err := dryRunStage(ctx, c, later)
	changedCRD := func(u *unstructured.Unstructured) bool { return ssautils.IsCRD(u) && prior[ObjectID(u)] != nil }
	if err == nil || !slices.ContainsFunc(first, changedCRD) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, schemaSettle)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
		again := dryRunStage(ctx, c, later)
		if ctx.Err() != nil {
			return err // the last complete answer
		}
		if again == nil {
			return nil
		}
		err = again
	}
}

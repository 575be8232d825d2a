package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render/declarations"
)

// Annotations cairn keeps on the CRs it mirrors from Git.
const (
	specDigestAnnotation = "cairn.dev/spec-digest"
	originAnnotation     = "cairn.dev/origin"
	// sourceAnnotation is the file that declares an instance, relative to the path
	// cairn reads: while that file cannot be read, the instance is neither applied nor
	// removed (see heldFile).
	sourceAnnotation = "cairn.dev/source"
	// inputDigestAnnotation is the digest of everything the instance's render reads
	// (see inputDigest), and inputRevisionAnnotation the revision it was written at:
	// the input the revision step hands to the instance reconcile.
	inputDigestAnnotation   = "cairn.dev/input-digest"
	inputRevisionAnnotation = "cairn.dev/input-revision"
	// refreshAnnotation is the last refresh of the Registries the instance's render
	// uses ("<registry>@<time>": their Secrets or ConfigMaps changed in the cluster,
	// see Revision.Refreshed), part of its input digest: no commit changes the
	// input then, so the refresh is written as one, and the reconcile of whichever
	// replica holds the instance is woken by it and renders and verifies again.
	refreshAnnotation = "cairn.dev/input-refresh"
)

// instanceAnnotations are the annotations cairn sets on the CR of r's instance.
func (in *revisionInput) instanceAnnotations(r *instancePlan) map[string]string {
	origin := in.set.Origins[declarations.Key(cairnv1.ModuleInstanceKind, r.mi.Namespace, r.mi.Name)]
	ann := map[string]string{specDigestAnnotation: r.specDigest, sourceAnnotation: origin.File,
		inputDigestAnnotation: r.inputDigest, inputRevisionAnnotation: in.rev.SHA}
	if r.refresh != "" {
		ann[refreshAnnotation] = r.refresh
	}
	if t := in.set.Tenant(r.mi.Namespace, r.mi.Name); t != nil {
		ann[cairnv1.TenantAnnotation] = t.Name
	}
	return ann
}

// mirror server-side applies the declaration obj (spec from Git) as cairn and reads
// back the live object, so that kubectl edits are reverted and the UID is known.
func mirror(ctx context.Context, c client.Client, obj client.Object, annotations map[string]string) error {
	u, err := toApplyObject(obj, annotations)
	if err != nil {
		return err
	}
	desired := u.Object["spec"]
	//nolint:staticcheck // the response of a server-side apply patch fills u
	if err := c.Patch(ctx, u, client.Apply, client.FieldOwner(cairnv1.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	if err := replaceEditedSpec(ctx, c, u, desired); err != nil {
		return err
	}
	// The CR is kept in the revision's state, and its managedFields are much of it;
	// nothing reads them (status writes are merge patches of the status subresource,
	// where the API server keeps its own managedFields: docs/benchmarks.md, B8 at scale).
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("failed to read %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// toApplyObject keeps only what Git declares: type, name, namespace, labels,
// annotations and spec.
func toApplyObject(obj client.Object, annotations map[string]string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %s: %w", obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m["spec"]}}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		gvks, _, err := Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		gvk = gvks[0]
	}
	u.SetGroupVersionKind(gvk)
	u.SetName(obj.GetName())
	u.SetNamespace(obj.GetNamespace())
	labels := copyMap(obj.GetLabels())
	labels[cairnv1.ManagedByLabel] = cairnv1.ManagedByValue
	u.SetLabels(labels)
	ann := copyMap(obj.GetAnnotations())
	for k, v := range annotations {
		ann[k] = v
	}
	u.SetAnnotations(ann)
	return u, nil
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// patchStatus writes obj's status with a merge patch computed against before, of
// the status alone: the status subresource ignores the rest, but a resourceVersion
// in the patch (before and obj read at two versions) would make it fail on any
// write to the object since, the revision step's next input among them, and
// retrying would not help. No lock is lost by leaving it out: the patch carried a
// resourceVersion only when before and obj had been read at two versions, never
// as a guard that writers of the status relied on. obj is updated with the response.
func patchStatus(ctx context.Context, c client.Client, obj, before client.Object) error {
	data, err := client.MergeFrom(before).Data(obj)
	if err != nil {
		return fmt.Errorf("failed to compute the status patch of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("failed to compute the status patch of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	st, ok := fields["status"]
	if !ok {
		return nil // nothing changed: a drift check that found nothing writes nothing
	}
	patch, err := json.Marshal(map[string]json.RawMessage{"status": st})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to patch status of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// kindOf returns the kind of a typed object from the scheme.
func kindOf(obj client.Object) string {
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return "object"
	}
	return gvks[0].Kind
}

// replaceEditedSpec puts back the spec from Git when the live spec differs from it:
// a server-side apply keeps fields set by another manager (a kubectl edit), and the
// spec belongs to Git as a whole. u is updated with the response.
func replaceEditedSpec(ctx context.Context, c client.Client, u *unstructured.Unstructured, desired any) error {
	live, _ := json.Marshal(u.Object["spec"])
	want, _ := json.Marshal(desired)
	if bytes.Equal(live, want) {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec", "value": desired}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, u, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("failed to restore the spec of %s %s from Git: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	return nil
}

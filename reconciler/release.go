package reconciler

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/secretgen"
)

// What a revision keeps of an instance once its reconcile is done. The revision
// state lives until the next revision, and a controller at rest holds the state of
// its last one: kept whole, the renders were a quarter of its heap at 1000
// instances (docs/benchmarks.md, B6). Once an instance's reconcile is done, only
// its outcome and what the verdicts over the revision read of its render stay:
// each object's identity and kind, and the scope of the kinds its CRDs define
// (shape). Those verdicts (moves, contracts, the scopes of kinds, the prune
// caps) read the shape alone, so an instance releasing its render while another
// instance's verdict runs is never a race.

// shapeOf is what the verdicts over the revision read of objects: each object's
// apiVersion, kind, namespace and name, and, of a CRD, the group, kind and scope
// it defines (crds.Scopes).
func shapeOf(objects []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objects))
	for i, u := range objects {
		meta := map[string]any{"name": u.GetName()}
		if ns := u.GetNamespace(); ns != "" {
			meta["namespace"] = ns
		}
		o := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta}
		if crds.Is(u) {
			spec := map[string]any{}
			for _, f := range [][]string{{"group"}, {"scope"}, {"names", "kind"}} {
				if v, ok, _ := unstructured.NestedString(u.Object, append([]string{"spec"}, f...)...); ok {
					_ = unstructured.SetNestedField(spec, v, f...)
				}
			}
			o["spec"] = spec
		}
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out
}

// shapeInventory is the ids of everything r owns after this sync (its rendered
// objects and generated Secrets, as desiredInventory) without their hashes: what
// another instance's prune leaves out.
func (r *instanceRun) shapeInventory() apply.Inventory {
	inv := make(apply.Inventory, len(r.shape))
	for _, u := range r.shape {
		id := apply.ObjectID(u)
		inv[id] = cairnv1.InventoryEntry{ID: id, Version: u.GetAPIVersion()}
	}
	return inv.Union(secretgen.Inventory(r.mi))
}

// releaseRender ends r's reconcile at this revision: its result is kept (final),
// then its render's objects and the inventory its apply went towards are dropped.
// Only r's own phases read them, and they are done; the verdicts read r.shape.
func (r *instanceRun) releaseRender() {
	res := r.result()
	r.final = &res
	r.objects = nil
	if r.rendered != nil {
		r.rendered.Objects = nil // r's own copy (keyedDigest), the hooks and digests stay
	}
	r.wrote.desired = nil
}

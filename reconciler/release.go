package reconciler

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
// each object's id, the kinds it uses, and the scope of the kinds its CRDs define
// (renderShape). Those verdicts (moves, contracts, the scopes of kinds, the prune
// caps) read the shape alone, so an instance releasing its render while another
// instance's verdict runs is never a race.

// renderShape is what the verdicts over the revision read of a placed render:
// each object's id and apiVersion (entries, sorted as the render), the kinds it
// uses, and, of its CRDs, the group, kind and scope each defines (crds.Scopes).
// Compact on purpose: it outlives the render in every instance of the revision.
type renderShape struct {
	entries []cairnv1.InventoryEntry // ID and Version; no hash
	kinds   []schema.GroupVersionKind
	crds    []*unstructured.Unstructured
}

// shapeOf is the shape of objects.
func shapeOf(objects []*unstructured.Unstructured) *renderShape {
	sh := &renderShape{entries: make([]cairnv1.InventoryEntry, len(objects))}
	seen := map[schema.GroupVersionKind]bool{}
	for i, u := range objects {
		sh.entries[i] = cairnv1.InventoryEntry{ID: apply.ObjectID(u), Version: u.GetAPIVersion()}
		if gvk := u.GroupVersionKind(); !seen[gvk] {
			seen[gvk] = true
			sh.kinds = append(sh.kinds, gvk)
		}
		if crds.Is(u) {
			spec := map[string]any{}
			for _, f := range [][]string{{"group"}, {"scope"}, {"names", "kind"}} {
				if v, ok, _ := unstructured.NestedString(u.Object, append([]string{"spec"}, f...)...); ok {
					_ = unstructured.SetNestedField(spec, v, f...)
				}
			}
			sh.crds = append(sh.crds, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
				"metadata": map[string]any{"name": u.GetName()}, "spec": spec}})
		}
	}
	return sh
}

// The methods of a shape take nil as the shape of no render.

// ids is the set of the shape's object ids (a new map each time).
func (sh *renderShape) ids() map[string]bool {
	out := map[string]bool{}
	for _, e := range sh.all() {
		out[e.ID] = true
	}
	return out
}

// holds tells whether the render holds the object id.
func (sh *renderShape) holds(id string) bool {
	return slices.ContainsFunc(sh.all(), func(e cairnv1.InventoryEntry) bool { return e.ID == id })
}

// uses tells whether the render holds an object of one of kinds.
func (sh *renderShape) uses(kinds map[schema.GroupKind]bool) bool {
	if sh == nil {
		return false
	}
	return slices.ContainsFunc(sh.kinds, func(gvk schema.GroupVersionKind) bool { return kinds[gvk.GroupKind()] })
}

// scopes are the kinds its CRDs define, each with whether it is namespaced.
func (sh *renderShape) scopes() map[schema.GroupKind]bool {
	if sh == nil {
		return map[schema.GroupKind]bool{}
	}
	return crds.Scopes(sh.crds)
}

func (sh *renderShape) all() []cairnv1.InventoryEntry {
	if sh == nil {
		return nil
	}
	return sh.entries
}

// kindObjects stands for the render where only kinds and CRDs count (contracts.Infer,
// crds.Scopes): its CRDs, then one object of each kind it uses.
func (sh *renderShape) kindObjects() []*unstructured.Unstructured {
	if sh == nil {
		return nil
	}
	out := slices.Clone(sh.crds)
	for _, gvk := range sh.kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		out = append(out, u)
	}
	return out
}

// shapeInventory is the ids of everything r owns after this sync (its rendered
// objects and generated Secrets, as desiredInventory) without their hashes: what
// another instance's prune leaves out.
func (r *instanceState) shapeInventory() apply.Inventory {
	inv := apply.Inventory{}
	for _, e := range r.shape.all() {
		inv[e.ID] = e
	}
	return inv.Union(secretgen.Inventory(r.mi))
}

// releaseRender drops r's render's objects once its reconcile is done (see done):
// only r's own phases read them, and they are done; the verdicts read r.shape.
func (r *instanceState) releaseRender() {
	r.objects = nil
	if r.rendered != nil {
		r.rendered.Objects = nil // r's own copy (keyedDigest), the hooks and digests stay
	}
}

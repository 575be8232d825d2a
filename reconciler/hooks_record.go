package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render"
)

// hooksSecretPrefix starts the name of the Secret, in cairn's namespace, that holds
// a chart instance's hookRecord; a render may not use it.
const hooksSecretPrefix = "cairn-hooks-"

const hooksSecretKey = "hooks.json.gz"

// hookRecord is what removing a chart instance needs of its hooks, written at each
// successful sync of an instance whose chart has hooks (a Secret of cairn's
// namespace, since hooks may be Secrets): a removed instance has no render.
type hookRecord struct {
	// Delete are the pre-delete and post-delete hooks of the last good render.
	Delete []render.Hook `json:"delete,omitempty"`
	// Left are the objects of install and upgrade hooks that ran, of this render and
	// earlier ones: removing the instance deletes those still there and still the
	// instance's, as it deletes its objects.
	Left []cairnv1.InventoryEntry `json:"left,omitempty"`
	// Ran says that the pre hooks of an event ran for a render that has not synced
	// yet (its apply failed or is still waiting for health): a later attempt at the
	// same render does not run them again, and runs the post hooks of that event.
	// A successful sync clears it.
	Ran *hookRun `json:"ran,omitempty"`
}

// hookRun is an event whose pre hooks ran for the render of Digest.
type hookRun struct {
	Event  string `json:"event"`
	Digest string `json:"digest"`
}

// hasHookRecord tells whether mi may have a hook record: its status names one,
// or it is a chart (whose record may have been written by an attempt whose status
// was not).
func hasHookRecord(mi *cairnv1.ModuleInstance) bool {
	return mi.Status.HookRecord != "" || (moduleKindOf(mi) != nil && moduleKindOf(mi).hooks())
}

// hooksSecretName is the name of mi's hook record: cairn-hooks-<namespace>.<name>,
// or cairn-hooks-<hash> when that is too long for a name.
func hooksSecretName(mi *cairnv1.ModuleInstance) string {
	return apply.InstanceSecretName(hooksSecretPrefix, mi)
}

// loadHooks reads mi's hook record; an empty one when it has none.
func (st inventoryStore) loadHooks(ctx context.Context, mi *cairnv1.ModuleInstance) (hookRecord, error) {
	var s corev1.Secret
	var rec hookRecord
	err := st.Client.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: hooksSecretName(mi)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return rec, nil
	case err != nil:
		return rec, fmt.Errorf("failed to read the hook record of %s/%s: %w", mi.Namespace, mi.Name, err)
	}
	if err := apply.DecodeGzipJSON(s.Data[hooksSecretKey], &rec); err != nil {
		return rec, fmt.Errorf("failed to decode the hook record of %s/%s: %w", mi.Namespace, mi.Name, err)
	}
	return rec, nil
}

// empty tells whether the record holds nothing to run or remove.
func (rec hookRecord) empty() bool {
	return len(rec.Delete) == 0 && len(rec.Left) == 0 && rec.Ran == nil
}

// storeHooks writes mi's hook record, or deletes it when it is empty.
func (st inventoryStore) storeHooks(ctx context.Context, mi *cairnv1.ModuleInstance, rec hookRecord) error {
	if rec.empty() {
		return st.removeHooks(ctx, mi)
	}
	name := hooksSecretName(mi)
	if err := st.ApplySecret(ctx, name, hooksSecretKey, rec); err != nil {
		return fmt.Errorf("failed to write hook record %s/%s: %w", st.Namespace, name, err)
	}
	return nil
}

// removeHooks deletes mi's hook record.
func (st inventoryStore) removeHooks(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hooksSecretName(mi), Namespace: st.Namespace}}
	if err := st.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete hook record %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// nextHookRecord is the record after a successful sync of r: the delete hooks of its
// render, and the install and upgrade hooks of its render added to those left before.
func nextHookRecord(prev hookRecord, hooks []render.Hook) hookRecord {
	left := apply.InventoryFromEntries(prev.Left)
	var rec hookRecord
	for _, h := range hooks {
		if h.RunsOn(render.HookPreDelete) || h.RunsOn(render.HookPostDelete) {
			rec.Delete = append(rec.Delete, h)
		}
		if len(h.Events) > 0 && !onlyDelete(h) {
			id := apply.ObjectID(h.Object)
			left[id] = cairnv1.InventoryEntry{ID: id, Version: h.Object.GetAPIVersion()}
		}
	}
	if len(left) > 0 {
		rec.Left = left.Entries()
	}
	return rec
}

func onlyDelete(h render.Hook) bool {
	for _, e := range h.Events {
		if e != render.HookPreDelete && e != render.HookPostDelete {
			return false
		}
	}
	return true
}

// recordHooks writes the hook record after a successful sync whose render has
// hooks, or of an instance that has one (status.hookRecord) and whose render has
// none now (its chart dropped them, or it is not a chart any more): its old delete
// hooks no longer run on its removal (the objects its install hooks left still go
// then). An instance with neither reads nothing.
func (s *syncRun) recordHooks(ctx context.Context, r *instanceRun, mi *cairnv1.ModuleInstance) error {
	if r.rendered == nil || (len(r.rendered.Hooks) == 0 && mi.Status.HookRecord == "") {
		return nil
	}
	prev, err := s.hookRecordOf(ctx, r)
	if err != nil {
		return err
	}
	return s.storeHookRecord(ctx, r, mi, nextHookRecord(prev, r.rendered.Hooks))
}

// hookRecordOf is r's hook record, read once per sync.
func (s *syncRun) hookRecordOf(ctx context.Context, r *instanceRun) (hookRecord, error) {
	if r.hookRecord != nil {
		return *r.hookRecord, nil
	}
	rec, err := s.e.inventories().loadHooks(ctx, r.live)
	if err != nil {
		return rec, err
	}
	r.hookRecord = &rec
	return rec, nil
}

// storeHookRecord writes r's hook record (for mi, its CR) and remembers it.
// status.hookRecord names the record while there is one (mi's status is
// recorded after this, or, for the pre hooks, at the end of the attempt).
func (s *syncRun) storeHookRecord(ctx context.Context, r *instanceRun, mi *cairnv1.ModuleInstance, rec hookRecord) error {
	if err := s.e.inventories().storeHooks(ctx, mi, rec); err != nil {
		r.hookRecord = nil // read it again: the write may or may not have happened
		return err
	}
	r.hookRecord = &rec
	mi.Status.HookRecord = ""
	if !rec.empty() {
		mi.Status.HookRecord = hooksSecretName(mi)
	}
	return nil
}

// hookOwnerOf is the owner of mi's hooks, as setOwnerLabels labels them.
func hookOwnerOf(mi *cairnv1.ModuleInstance) hookOwner {
	return hookOwner{key: cairnv1.InstanceKey(mi.Namespace, mi.Name), uid: string(mi.UID)}
}

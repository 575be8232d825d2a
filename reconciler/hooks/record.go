package hooks

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

// SecretPrefix starts the name of the Secret, in cairn's namespace, that holds a
// chart instance's Record; a render may not use it.
const SecretPrefix = "cairn-hooks-"

const secretKey = "hooks.json.gz"

// Record is what removing a chart instance needs of its hooks, written at each
// successful sync of an instance whose chart has hooks (a Secret of cairn's
// namespace, since hooks may be Secrets): a removed instance has no render.
type Record struct {
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
	Ran *PreRun `json:"ran,omitempty"`
}

// PreRun is an event whose pre hooks ran for the render of Digest.
type PreRun struct {
	// Event is the pre hooks' event (pre-install or pre-upgrade).
	Event string `json:"event"`
	// Digest is the render digest they ran for.
	Digest string `json:"digest"`
}

// SecretName is the name of mi's hook record: cairn-hooks-<namespace>.<name>, or
// cairn-hooks-<hash> when that is too long for a name.
func SecretName(mi *cairnv1.ModuleInstance) string {
	return apply.InstanceSecretName(SecretPrefix, mi)
}

// LoadRecord reads mi's hook record from namespace (cairn's) with c (cairn's own
// client); an empty one when it has none.
func LoadRecord(ctx context.Context, c client.Client, namespace string, mi *cairnv1.ModuleInstance) (Record, error) {
	var s corev1.Secret
	var rec Record
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: SecretName(mi)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return rec, nil
	case err != nil:
		return rec, fmt.Errorf("failed to read the hook record of %s/%s: %w", mi.Namespace, mi.Name, err)
	}
	if err := apply.DecodeGzipJSON(s.Data[secretKey], &rec); err != nil {
		return rec, fmt.Errorf("failed to decode the hook record of %s/%s: %w", mi.Namespace, mi.Name, err)
	}
	return rec, nil
}

// Empty tells whether the record holds nothing to run or remove.
func (rec Record) Empty() bool {
	return len(rec.Delete) == 0 && len(rec.Left) == 0 && rec.Ran == nil
}

// StoreRecord writes mi's hook record to namespace (cairn's) with c (cairn's own
// client), or deletes it when it is empty.
func StoreRecord(ctx context.Context, c client.Client, namespace string, mi *cairnv1.ModuleInstance, rec Record) error {
	if rec.Empty() {
		return RemoveRecord(ctx, c, namespace, mi)
	}
	name := SecretName(mi)
	if err := (apply.InventoryStore{Client: c, Namespace: namespace}).ApplySecret(ctx, name, secretKey, rec); err != nil {
		return fmt.Errorf("failed to write hook record %s/%s: %w", namespace, name, err)
	}
	return nil
}

// RemoveRecord deletes mi's hook record from namespace (cairn's) with c (cairn's own
// client); one that is not there is no error.
func RemoveRecord(ctx context.Context, c client.Client, namespace string, mi *cairnv1.ModuleInstance) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(mi), Namespace: namespace}}
	if err := c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete hook record %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// NextRecord is the record after a successful sync of a render with hooks (or the
// pre hooks of one): the delete hooks of the render, and its install and upgrade
// hooks added to those prev left. Its Ran is empty.
func NextRecord(prev Record, hooks []render.Hook) Record {
	left := apply.InventoryFromEntries(prev.Left)
	var rec Record
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

package reconciler

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

// inlineInventoryLimit is the number of entries kept in the status; larger inventories
// are stored gzip-compressed in a Secret of cairn's namespace (see inventoryStore).
const inlineInventoryLimit = 500

const inventorySecretKey = "inventory.json.gz"

// inventorySecretPrefix starts the name of every inventory Secret; a render may not use it.
const inventorySecretPrefix = "cairn-inventory-"

// inventorySecretName is the name, in cairn's namespace, of the Secret holding mi's
// large inventory: cairn-inventory-<namespace>.<name> (a namespace has no dot), or
// cairn-inventory-<hash> when that is too long for a name.
func inventorySecretName(mi *cairnv1.ModuleInstance) string {
	return instanceSecretName(inventorySecretPrefix, mi)
}

// instanceSecretName is <prefix><namespace>.<name>, or <prefix><hash> when that is
// too long for a name.
func instanceSecretName(prefix string, mi *cairnv1.ModuleInstance) string {
	if n := prefix + mi.Namespace + "." + mi.Name; len(n) <= validation.DNS1123SubdomainMaxLength {
		return n
	}
	sum := sha256.Sum256([]byte(mi.Namespace + "/" + mi.Name))
	return prefix + hex.EncodeToString(sum[:16])
}

// legacyInventorySecretName is where cairn kept a large inventory before: a Secret of
// that name in the instance's own namespace, which cairn then had to write in every
// namespace.
func legacyInventorySecretName(mi *cairnv1.ModuleInstance) string {
	return inventorySecretPrefix + mi.Name
}

// inventoryStore keeps large inventories in Secrets of cairn's namespace, as cairn:
// cairn needs no right to Secrets of any other namespace, and no tenant may touch them.
type inventoryStore struct {
	c         client.Client
	namespace string
}

// inventories is the engine's inventory store.
func (e *Engine) inventories() inventoryStore {
	return inventoryStore{c: e.cluster.client, namespace: e.namespace()}
}

// secretKey is where the Secret that ref names lives: cairn's namespace, or the
// instance's own for an inventory written before.
func (st inventoryStore) secretKey(mi *cairnv1.ModuleInstance, ref string) client.ObjectKey {
	if ref != inventorySecretName(mi) && ref == legacyInventorySecretName(mi) {
		return client.ObjectKey{Namespace: mi.Namespace, Name: ref}
	}
	return client.ObjectKey{Namespace: st.namespace, Name: ref}
}

// load reads the last inventory of mi from its status or its Secret.
func (st inventoryStore) load(ctx context.Context, mi *cairnv1.ModuleInstance) (apply.Inventory, error) {
	inv := mi.Status.Inventory
	if inv == nil {
		return apply.Inventory{}, nil
	}
	if inv.SecretRef == nil {
		return apply.InventoryFromEntries(inv.Entries), nil
	}
	var s corev1.Secret
	key := st.secretKey(mi, inv.SecretRef.Name)
	if err := st.c.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("failed to read inventory Secret %s: %w", key, err)
	}
	var entries []cairnv1.InventoryEntry
	if err := decodeGzipJSON(s.Data[inventorySecretKey], &entries); err != nil {
		return nil, fmt.Errorf("failed to decode inventory Secret %s: %w", key, err)
	}
	return apply.InventoryFromEntries(entries), nil
}

// store sets inv on mi's status, spilling it into a Secret when large. An inventory
// with an object name built from a value of a Secret (one of masks, see
// instanceValues) is kept whole in the Secret too, and the status shows its entries
// masked: prune reads the Secret, so it still finds the object. The status itself is
// written by the caller.
func (st inventoryStore) store(ctx context.Context, mi *cairnv1.ModuleInstance, inv apply.Inventory, masks []string) error {
	entries := inv.Entries()
	masked := maskedEntries(entries, masks)
	if len(entries) <= inlineInventoryLimit && masked == nil {
		mi.Status.Inventory = &cairnv1.Inventory{Entries: entries, Count: int32(len(entries))}
		return nil
	}
	name, err := st.writeSecret(ctx, mi, entries)
	if err != nil {
		return err
	}
	mi.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: name}, Count: int32(len(entries))}
	if len(entries) <= inlineInventoryLimit {
		mi.Status.Inventory.Entries = masked
	}
	return nil
}

// maskedEntries returns entries with every secret string of masks in their ids
// masked, or nil when no id holds one.
func maskedEntries(entries []cairnv1.InventoryEntry, masks []string) []cairnv1.InventoryEntry {
	var out []cairnv1.InventoryEntry
	for i, e := range entries {
		id := maskText(e.ID, masks)
		if id == e.ID {
			continue
		}
		if out == nil {
			out = slices.Clone(entries)
		}
		out[i].ID = id
	}
	return out
}

// writeSecret writes entries to mi's inventory Secret and returns its name.
func (st inventoryStore) writeSecret(ctx context.Context, mi *cairnv1.ModuleInstance, entries []cairnv1.InventoryEntry) (string, error) {
	name := inventorySecretName(mi)
	if err := st.apply(ctx, name, inventorySecretKey, entries); err != nil {
		return "", fmt.Errorf("failed to write inventory Secret %s/%s: %w", st.namespace, name, err)
	}
	return name, nil
}

// apply writes v, as gzip-compressed JSON under key, to Secret name of cairn's
// namespace.
func (st inventoryStore) apply(ctx context.Context, name, key string, v any) error {
	data, err := encodeGzipJSON(v)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: st.namespace,
			Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}},
		Data: map[string][]byte{key: data},
	}
	return st.c.Patch(ctx, s, client.Apply, client.FieldOwner(cairnv1.FieldManager), client.ForceOwnership) //nolint:staticcheck
}

// keep writes the inventory a deleted CR held in its status to mi's inventory Secret,
// so that the next sync finds every object of it (see adoptedInventory); an
// inventory already in a Secret stays there, and an empty one is not written.
func (st inventoryStore) keep(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	inv := mi.Status.Inventory
	if inv == nil || inv.SecretRef != nil || len(inv.Entries) == 0 {
		return nil
	}
	_, err := st.writeSecret(ctx, mi, inv.Entries)
	return err
}

// remove deletes the spilled inventory of a removed instance.
func (st inventoryStore) remove(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: inventorySecretName(mi), Namespace: st.namespace}}
	if err := st.c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete inventory Secret: %w", err)
	}
	return nil
}

// encodeGzipJSON is v as gzip-compressed JSON.
func encodeGzipJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeGzipJSON decodes gzip-compressed JSON (at most 256 MiB of it) into v.
func decodeGzipJSON(data []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer zr.Close()
	return json.NewDecoder(io.LimitReader(zr, 256<<20)).Decode(v)
}

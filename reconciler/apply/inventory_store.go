package apply

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
)

// inlineInventoryLimit is the number of entries kept in the status; larger inventories
// are stored gzip-compressed in a Secret of cairn's namespace (see InventoryStore).
const inlineInventoryLimit = 500

// InventorySecretKey is the key of an inventory Secret's data that holds its entries.
const InventorySecretKey = "inventory.json.gz"

// InventorySecretPrefix starts the name of every inventory Secret; a render may not use it.
const InventorySecretPrefix = "cairn-inventory-"

// InventorySecretName is the name, in cairn's namespace, of the Secret holding mi's
// large inventory: cairn-inventory-<namespace>.<name> (a namespace has no dot), or
// cairn-inventory-<hash> when that is too long for a name.
func InventorySecretName(mi *cairnv1.ModuleInstance) string {
	return InstanceSecretName(InventorySecretPrefix, mi)
}

// InstanceSecretName is <prefix><namespace>.<name>, or <prefix><hash> when that is
// too long for a name.
func InstanceSecretName(prefix string, mi *cairnv1.ModuleInstance) string {
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
	return InventorySecretPrefix + mi.Name
}

// InventoryStore keeps large inventories in Secrets of cairn's namespace, as cairn:
// cairn needs no right to Secrets of any other namespace, and no tenant may touch them.
type InventoryStore struct {
	// Client is cairn's own client (not an instance's identity).
	Client client.Client
	// Namespace is cairn's namespace, which holds the Secrets.
	Namespace string
}

// secretKey is where the Secret that ref names lives: cairn's namespace, or the
// instance's own for an inventory written before.
func (st InventoryStore) secretKey(mi *cairnv1.ModuleInstance, ref string) client.ObjectKey {
	if ref != InventorySecretName(mi) && ref == legacyInventorySecretName(mi) {
		return client.ObjectKey{Namespace: mi.Namespace, Name: ref}
	}
	return client.ObjectKey{Namespace: st.Namespace, Name: ref}
}

// Load reads the last inventory of mi from its status or its Secret.
func (st InventoryStore) Load(ctx context.Context, mi *cairnv1.ModuleInstance) (Inventory, error) {
	inv := mi.Status.Inventory
	if inv == nil {
		return Inventory{}, nil
	}
	if inv.SecretRef == nil {
		return InventoryFromEntries(inv.Entries), nil
	}
	var s corev1.Secret
	key := st.secretKey(mi, inv.SecretRef.Name)
	if err := st.Client.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("failed to read inventory Secret %s: %w", key, err)
	}
	var entries []cairnv1.InventoryEntry
	if err := DecodeGzipJSON(s.Data[InventorySecretKey], &entries); err != nil {
		return nil, fmt.Errorf("failed to decode inventory Secret %s: %w", key, err)
	}
	return InventoryFromEntries(entries), nil
}

// Store sets inv on mi's status, spilling it into a Secret when large. An inventory
// with an object name built from a value of a Secret (one that mask changes, see the
// engine's instanceValues) is kept whole in the Secret too, and the status shows its
// entries masked: prune reads the Secret, so it still finds the object. A nil mask
// masks nothing. The status itself is written by the caller.
func (st InventoryStore) Store(ctx context.Context, mi *cairnv1.ModuleInstance, inv Inventory, mask func(string) string) error {
	entries := inv.Entries()
	masked := maskedEntries(entries, mask)
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

// maskedEntries returns entries with their ids masked, or nil when mask changes none.
func maskedEntries(entries []cairnv1.InventoryEntry, mask func(string) string) []cairnv1.InventoryEntry {
	if mask == nil {
		return nil
	}
	var out []cairnv1.InventoryEntry
	for i, e := range entries {
		id := mask(e.ID)
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
func (st InventoryStore) writeSecret(ctx context.Context, mi *cairnv1.ModuleInstance, entries []cairnv1.InventoryEntry) (string, error) {
	name := InventorySecretName(mi)
	if err := st.ApplySecret(ctx, name, InventorySecretKey, entries); err != nil {
		return "", fmt.Errorf("failed to write inventory Secret %s/%s: %w", st.Namespace, name, err)
	}
	return name, nil
}

// ApplySecret writes v, as gzip-compressed JSON under key, to Secret name of cairn's
// namespace.
func (st InventoryStore) ApplySecret(ctx context.Context, name, key string, v any) error {
	data, err := EncodeGzipJSON(v)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: st.Namespace,
			Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}},
		Data: map[string][]byte{key: data},
	}
	return st.Client.Patch(ctx, s, client.Apply, client.FieldOwner(cairnv1.FieldManager), client.ForceOwnership) //nolint:staticcheck
}

// Keep writes the inventory a deleted CR held in its status to mi's inventory Secret,
// so that the next sync finds every object of it (see the engine's adoptedInventory); an
// inventory already in a Secret stays there, and an empty one is not written.
func (st InventoryStore) Keep(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	inv := mi.Status.Inventory
	if inv == nil || inv.SecretRef != nil || len(inv.Entries) == 0 {
		return nil
	}
	_, err := st.writeSecret(ctx, mi, inv.Entries)
	return err
}

// Remove deletes the spilled inventory of a removed instance.
func (st InventoryStore) Remove(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: InventorySecretName(mi), Namespace: st.Namespace}}
	if err := st.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete inventory Secret: %w", err)
	}
	return nil
}

// EncodeGzipJSON is v as gzip-compressed JSON.
func EncodeGzipJSON(v any) ([]byte, error) {
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

// DecodeGzipJSON decodes gzip-compressed JSON (at most 256 MiB of it) into v.
func DecodeGzipJSON(data []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer zr.Close()
	return json.NewDecoder(io.LimitReader(zr, 256<<20)).Decode(v)
}

package reconciler

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// inlineInventoryLimit is the number of entries kept in the status; larger inventories
// are stored gzip-compressed in a Secret beside the instance.
const inlineInventoryLimit = 500

const inventorySecretKey = "inventory.json.gz"

func inventorySecretName(mi *cairnv1.ModuleInstance) string { return inventorySecretPrefix + mi.Name }

// inventorySecretPrefix starts the name of every inventory Secret; a render may not use it.
const inventorySecretPrefix = "cairn-inventory-"

// loadInventory reads the last inventory of mi from its status or its Secret.
func loadInventory(ctx context.Context, c client.Client, mi *cairnv1.ModuleInstance) (inventory, error) {
	inv := mi.Status.Inventory
	if inv == nil {
		return inventory{}, nil
	}
	if inv.SecretRef == nil {
		return inventoryFromEntries(inv.Entries), nil
	}
	var s corev1.Secret
	key := client.ObjectKey{Namespace: mi.Namespace, Name: inv.SecretRef.Name}
	if err := c.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("failed to read inventory Secret %s: %w", key, err)
	}
	entries, err := decodeEntries(s.Data[inventorySecretKey])
	if err != nil {
		return nil, fmt.Errorf("failed to decode inventory Secret %s: %w", key, err)
	}
	return inventoryFromEntries(entries), nil
}

// storeInventory sets inv on mi's status, spilling it into a Secret when large. The
// status itself is written by the caller.
func storeInventory(ctx context.Context, c client.Client, mi *cairnv1.ModuleInstance, inv inventory) error {
	entries := inv.entries()
	if len(entries) <= inlineInventoryLimit {
		mi.Status.Inventory = &cairnv1.Inventory{Entries: entries, Count: int32(len(entries))}
		return nil
	}
	data, err := encodeEntries(entries)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: inventorySecretName(mi), Namespace: mi.Namespace, Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}},
		Data:       map[string][]byte{inventorySecretKey: data},
	}
	if err := c.Patch(ctx, s, client.Apply, client.FieldOwner(cairnv1.FieldManager), client.ForceOwnership); err != nil { //nolint:staticcheck
		return fmt.Errorf("failed to write inventory Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	mi.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: s.Name}, Count: int32(len(entries))}
	return nil
}

// deleteInventorySecret removes the spilled inventory of a removed instance.
func deleteInventorySecret(ctx context.Context, c client.Client, mi *cairnv1.ModuleInstance) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: inventorySecretName(mi), Namespace: mi.Namespace}}
	if err := c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete inventory Secret: %w", err)
	}
	return nil
}

func encodeEntries(entries []cairnv1.InventoryEntry) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(entries); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeEntries(data []byte) ([]cairnv1.InventoryEntry, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var entries []cairnv1.InventoryEntry
	err = json.NewDecoder(io.LimitReader(zr, 256<<20)).Decode(&entries)
	return entries, err
}

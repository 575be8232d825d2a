package apply

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Inventory maps object ids (<namespace>_<name>_<group>_<kind>) to their entries.
type Inventory map[string]cairnv1.InventoryEntry

// ObjectID returns the inventory id of an object.
func ObjectID(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

// ObjectHash is a short digest of what is sent to the API server for u, keyed with
// the cluster's digest key (see reconciler.DigestKeySecret) so that it reveals nothing of u's
// values (a Secret's above all).
func ObjectHash(u *unstructured.Unstructured, key []byte) string {
	b, _ := json.Marshal(u.Object)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// InventoryOf is the inventory of objects: each one's id, API version and keyed hash.
func InventoryOf(objects []*unstructured.Unstructured, key []byte) Inventory {
	inv := make(Inventory, len(objects))
	for _, u := range objects {
		id := ObjectID(u)
		inv[id] = cairnv1.InventoryEntry{ID: id, Version: u.GetAPIVersion(), Hash: ObjectHash(u, key)}
	}
	return inv
}

// InventoryFromEntries is the inventory of entries as a status or a Secret records them.
func InventoryFromEntries(entries []cairnv1.InventoryEntry) Inventory {
	inv := make(Inventory, len(entries))
	for _, e := range entries {
		inv[e.ID] = e
	}
	return inv
}

// Entries returns the inventory sorted by id.
func (inv Inventory) Entries() []cairnv1.InventoryEntry {
	out := make([]cairnv1.InventoryEntry, 0, len(inv))
	for _, e := range inv {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Minus returns the entries of inv whose id is not in other.
func (inv Inventory) Minus(other Inventory) Inventory {
	out := Inventory{}
	for id, e := range inv {
		if _, ok := other[id]; !ok {
			out[id] = e
		}
	}
	return out
}

// Union returns a new inventory with the entries of both; other wins on equal ids.
func (inv Inventory) Union(other Inventory) Inventory {
	out := make(Inventory, len(inv)+len(other))
	for id, e := range inv {
		out[id] = e
	}
	for id, e := range other {
		out[id] = e
	}
	return out
}

// Objects returns skeleton objects (identity only) for the entries, for deletion and waits.
func (inv Inventory) Objects() ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(inv))
	for _, e := range inv.Entries() {
		meta, err := object.ParseObjMetadata(e.ID)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(e.Version)
		u.SetKind(meta.GroupKind.Kind)
		u.SetNamespace(meta.Namespace)
		u.SetName(meta.Name)
		out = append(out, u)
	}
	return out, nil
}

// Describe names an object the way kubectl does: Kind/namespace/name.
func Describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

package reconciler

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

// inventory maps object ids (<namespace>_<name>_<group>_<kind>) to their entries.
type inventory map[string]cairnv1.InventoryEntry

// objectID returns the inventory id of an object.
func objectID(u *unstructured.Unstructured) string {
	return object.UnstructuredToObjMetadata(u).String()
}

// objectHash is a short digest of what is sent to the API server for u, keyed with
// the cluster's digest key (see DigestKeySecret) so that it reveals nothing of u's
// values (a Secret's above all).
func objectHash(u *unstructured.Unstructured, key []byte) string {
	b, _ := json.Marshal(u.Object)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

func inventoryOf(objects []*unstructured.Unstructured, key []byte) inventory {
	inv := make(inventory, len(objects))
	for _, u := range objects {
		id := objectID(u)
		inv[id] = cairnv1.InventoryEntry{ID: id, Version: u.GetAPIVersion(), Hash: objectHash(u, key)}
	}
	return inv
}

func inventoryFromEntries(entries []cairnv1.InventoryEntry) inventory {
	inv := make(inventory, len(entries))
	for _, e := range entries {
		inv[e.ID] = e
	}
	return inv
}

// entries returns the inventory sorted by id.
func (inv inventory) entries() []cairnv1.InventoryEntry {
	out := make([]cairnv1.InventoryEntry, 0, len(inv))
	for _, e := range inv {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// minus returns the entries of inv whose id is not in other.
func (inv inventory) minus(other inventory) inventory {
	out := inventory{}
	for id, e := range inv {
		if _, ok := other[id]; !ok {
			out[id] = e
		}
	}
	return out
}

// union returns a new inventory with the entries of both; other wins on equal ids.
func (inv inventory) union(other inventory) inventory {
	out := make(inventory, len(inv)+len(other))
	for id, e := range inv {
		out[id] = e
	}
	for id, e := range other {
		out[id] = e
	}
	return out
}

// objects returns skeleton objects (identity only) for the entries, for deletion and waits.
func (inv inventory) objects() ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(inv))
	for _, e := range inv.entries() {
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

package reconciler

import "cairn.dev/cairn/reconciler/apply"

// inventoryStore is the engine's inventory store, with the hook records (see
// hooks_record.go) kept beside the inventories, in Secrets of cairn's namespace.
type inventoryStore struct {
	apply.InventoryStore
}

// inventories is the engine's inventory store.
func (e *Engine) inventories() inventoryStore {
	return inventoryStore{apply.InventoryStore{Client: e.cluster.client, Namespace: e.namespace()}}
}

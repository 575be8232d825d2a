package reconciler

import "cairn.dev/cairn/reconciler/apply"

// inventories is the engine's inventory store, in Secrets of cairn's namespace (the
// hook records kept beside them are package hooks').
func (e *Engine) inventories() apply.InventoryStore {
	return apply.InventoryStore{Client: e.cluster.client, Namespace: e.namespace()}
}

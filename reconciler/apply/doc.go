// Package apply is the apply layer of cairn's engine: what a sync does to the
// cluster for one instance, as functions that take a client (or a fluxcd ssa
// ResourceManager acting as the instance's identity), the objects and options, and
// return a report. It owns the server-side apply of the changed objects and its
// validation by server-side dry-run, the take-back of the first stage (CRDs,
// Namespaces) when the rest fails, the per-kind rules of Jobs, recreation of forced
// objects, deletion in reverse apply order and orphaning, the kstatus health wait,
// and the inventory (object ids, keyed hashes, their set operations) with its store.
// It knows nothing of the engine's run state: the engine calls it and records what it
// reports. It sits below the engine in the layers of internal/layers and imports
// only api/v1alpha1, reconciler/outcome and libraries; see docs/architecture.md.
package apply

// Package hooks owns the Helm hooks of a chart instance: which events a sync runs
// (Events, AfterEarlierRun), running the hooks of an event as the instance's identity
// and waiting for them (Run), the hook record a removal needs (Record, kept in a
// Secret of cairn's namespace: LoadRecord, StoreRecord, RemoveRecord, NextRecord),
// the removal of the hook objects an instance left (DeleteLeft), and the hooks a plan
// lists (Plan, Plans). It is a set of functions of a client and the instance's values:
// the engine (package reconciler) gathers those from its run state, calls them and
// records what they return. It sits above reconciler/apply in the layers of
// internal/layers and imports only api/v1alpha1, render, reconciler/apply,
// reconciler/outcome and libraries; see docs/architecture.md.
//
// Helm hooks (docs/modules.md, "Helm hooks"): the hooks of a chart instance run as `helm
// install` and `helm upgrade` run them. On the first sync of an instance pre-install
// runs before its objects are applied and post-install once they are healthy; on a
// later sync whose render changed, pre-upgrade and post-upgrade; when the instance
// leaves Git, pre-delete before its objects are deleted and post-delete after. The
// hooks of an event run one after another in Helm's order (render.HooksFor), each as
// the instance's identity: delete the object of an earlier run (before-hook-creation,
// the default), apply it with cairn's labels, wait for a Job to complete or a Pod to
// succeed; once all succeeded, those with hook-succeeded are deleted. A failed hook
// (its Job failed, it could not be applied, or it did not finish within the timeout)
// is deleted when it has hook-failed, those before it that have hook-succeeded too,
// and the instance fails with HookFailed: nothing after it is applied, pruned or
// deleted. Hooks are not in the inventory: see Record for what removes them.
package hooks

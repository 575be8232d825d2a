package hooks

import (
	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render"
)

// Events are the events whose hooks a sync runs, before its apply (pre) and once
// its objects are healthy (post), for a render with hooks and digest, of live (nil
// for a new instance) whose inventory before the sync is oldInv: install until it
// first synced (it never succeeded and applied none of its objects: a first sync
// that failed is retried as an install), upgrade when its render changed since its
// last good sync, none when it did not or there are no hooks. A retry at the same
// render runs them again unless they ran (see AfterEarlierRun).
func Events(hooks []render.Hook, digest string, live *cairnv1.ModuleInstance, oldInv apply.Inventory) (pre, post string) {
	switch {
	case len(hooks) == 0:
		return "", ""
	case live == nil || (live.Status.LastAppliedRevision == "" && !anyApplied(oldInv)):
		return render.HookPreInstall, render.HookPostInstall
	case live.Status.RenderDigest != digest:
		return render.HookPreUpgrade, render.HookPostUpgrade
	}
	return "", ""
}

// AfterEarlierRun is pre and post, or, when ran records pre hooks that ran for the
// render of digest, no pre and the post hooks of that event.
func AfterEarlierRun(ran *PreRun, digest, pre, post string) (string, string) {
	if ran == nil || ran.Digest != digest {
		return pre, post
	}
	if ran.Event == render.HookPreInstall {
		return "", render.HookPostInstall
	}
	return "", render.HookPostUpgrade
}

// anyApplied reports whether inv records an object as applied (with its hash): an
// entry without one was recorded before an apply that never came.
func anyApplied(inv apply.Inventory) bool {
	for _, e := range inv {
		if e.Hash != "" {
			return true
		}
	}
	return false
}

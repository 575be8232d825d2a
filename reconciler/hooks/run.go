package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// Owner is the instance whose hooks run: its instance label and UID.
type Owner struct{ Key, UID string }

// OwnerOf is the owner of mi's hooks, as the engine labels them.
func OwnerOf(mi *cairnv1.ModuleInstance) Owner {
	return Owner{Key: cairnv1.InstanceKey(mi.Namespace, mi.Name), UID: string(mi.UID)}
}

// runner runs the hooks of one event of one instance with the instance's client.
type runner struct {
	c     client.Client
	owner Owner
	event string
}

// Objects returns the objects of hooks.
func Objects(hooks []render.Hook) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(hooks))
	for i, h := range hooks {
		out[i] = h.Object
	}
	return out
}

// Run runs the hooks of event among hooks, in order, with c, the client of owner's
// identity, and returns how many ran. A hook that fails stops the run: it is
// deleted when it has hook-failed, those before it when they have hook-succeeded,
// and the failure is the instance's (HookFailed, or OwnershipConflict for a hook
// object another owns). Once all succeeded, those with hook-succeeded are deleted.
func Run(ctx context.Context, c client.Client, owner Owner, event string, hooks []render.Hook) (int, *outcome.Failure) {
	return runner{c: c, owner: owner, event: event}.run(ctx, hooks)
}

// run runs the hooks of the runner's event among hooks, in order, and returns how
// many ran.
func (h runner) run(ctx context.Context, hooks []render.Hook) (int, *outcome.Failure) {
	todo := render.HooksFor(hooks, h.event)
	for i, hk := range todo {
		if err := h.runOne(ctx, hk); err != nil {
			if hk.Deletes(render.HookFailed) {
				_ = h.deleteHook(ctx, hk.Object) // best effort: the hook's failure is what is reported
			}
			_ = h.deleteSucceeded(ctx, todo[:i])
			return i, h.failure(hk, err)
		}
	}
	if err := h.deleteSucceeded(ctx, todo); err != nil {
		return len(todo), outcome.Classify(cairnv1.ReasonHookFailed, fmt.Errorf("%s hooks: %w", h.event, err))
	}
	return len(todo), nil
}

// runOne deletes the object of an earlier run when the hook asks for it, applies
// the hook and waits for it to finish.
func (h runner) runOne(ctx context.Context, hk render.Hook) error {
	u := hk.Object
	live, err := apply.GetLive(ctx, h.c, u)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", apply.Describe(u), err)
	}
	switch {
	case live == nil:
	case !apply.OwnedBy(live, h.owner.Key, h.owner.UID):
		return outcome.NewStalled(cairnv1.ReasonOwnershipConflict, fmt.Errorf("%s already exists and is not this instance's", apply.Describe(u)))
	case hk.Deletes(render.HookBeforeCreation):
		if err := h.deleteHook(ctx, u); err != nil {
			return err
		}
	case runsToCompletion(u):
		return fmt.Errorf("%s exists from an earlier run and its delete policies (%s) do not delete it before it runs again",
			apply.Describe(u), strings.Join(hk.DeletePolicies, ","))
	}
	if _, err := apply.PatchApply(ctx, h.c, u); err != nil {
		return fmt.Errorf("failed to apply %s: %w", apply.Describe(u), err)
	}
	return waitHook(ctx, h.c, u)
}

// deleteSucceeded deletes, last first, the hooks that have hook-succeeded.
func (h runner) deleteSucceeded(ctx context.Context, hooks []render.Hook) error {
	var errs []error
	for i := len(hooks) - 1; i >= 0; i-- {
		if hooks[i].Deletes(render.HookSucceeded) {
			errs = append(errs, h.deleteHook(ctx, hooks[i].Object))
		}
	}
	return errors.Join(errs...)
}

// deleteHook deletes a hook's object if it is the instance's, and waits until it
// is gone. CustomResourceDefinitions are never deleted, as in Helm.
func (h runner) deleteHook(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetKind() == "CustomResourceDefinition" {
		return nil
	}
	action, _, err := apply.DeleteOne(ctx, h.c, u, h.owner.Key, h.owner.UID)
	if err != nil || action != ssa.DeletedAction {
		return err
	}
	return apply.WaitGone(ctx, h.c, []*unstructured.Unstructured{u}, hookDeleteWait)
}

// failure is the instance's failure for a hook that failed with err.
func (h runner) failure(hk render.Hook, err error) *outcome.Failure {
	msg := fmt.Errorf("%s hook %s (%s) failed: %w", h.event, apply.Describe(hk.Object), hk.Source, err)
	var f *outcome.Failure
	switch {
	case errors.As(err, &f) && f.Reason == cairnv1.ReasonOwnershipConflict:
		return &outcome.Failure{Kind: f.Kind, Reason: f.Reason, Err: msg}
	case errors.As(err, &f):
		return &outcome.Failure{Kind: f.Kind, Reason: cairnv1.ReasonHookFailed, Err: msg}
	}
	return outcome.Classify(cairnv1.ReasonHookFailed, msg)
}

// DeleteLeft deletes, with c, the install and upgrade hook objects a removed
// instance left (its record's Left), those still there and still owner's.
func DeleteLeft(ctx context.Context, c client.Client, owner Owner, left []cairnv1.InventoryEntry) error {
	objects, err := apply.InventoryFromEntries(left).Objects()
	if err != nil {
		return err
	}
	h := runner{c: c, owner: owner}
	var errs []error
	for _, u := range objects {
		errs = append(errs, h.deleteHook(ctx, u))
	}
	return errors.Join(errs...)
}

// runsToCompletion reports whether Helm waits for u: a Job or a Pod.
func runsToCompletion(u *unstructured.Unstructured) bool {
	return apply.IsJob(u) || isPod(u)
}

func isPod(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Pod"
}

package reconciler

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

// Helm hooks (DESIGN.md section 7b): the hooks of a chart instance run as `helm
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
// deleted. Hooks are not in the inventory: see hookRecord for what removes them.

// hookOwner is the instance whose hooks run: its instance label and UID.
type hookOwner struct{ key, uid string }

// hookRunner runs the hooks of one event of one instance with the instance's
// client.
type hookRunner struct {
	c     client.Client
	owner hookOwner
	event string
}

// hookObjects returns the objects of hooks.
func hookObjects(hooks []render.Hook) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(hooks))
	for i, h := range hooks {
		out[i] = h.Object
	}
	return out
}

// run runs the hooks of the runner's event among hooks, in order, and returns how
// many ran.
func (h hookRunner) run(ctx context.Context, hooks []render.Hook) (int, *outcome.Failure) {
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
func (h hookRunner) runOne(ctx context.Context, hk render.Hook) error {
	u := hk.Object
	live, err := apply.GetLive(ctx, h.c, u)
	if err != nil {
		return fmt.Errorf("failed to read %s: %w", apply.Describe(u), err)
	}
	switch {
	case live == nil:
	case !apply.OwnedBy(live, h.owner.key, h.owner.uid):
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
func (h hookRunner) deleteSucceeded(ctx context.Context, hooks []render.Hook) error {
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
func (h hookRunner) deleteHook(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetKind() == "CustomResourceDefinition" {
		return nil
	}
	action, _, err := apply.DeleteOne(ctx, h.c, u, h.owner.key, h.owner.uid)
	if err != nil || action != ssa.DeletedAction {
		return err
	}
	return apply.WaitGone(ctx, h.c, []*unstructured.Unstructured{u}, hookDeleteWait)
}

// failure is the instance's failure for a hook that failed with err.
func (h hookRunner) failure(hk render.Hook, err error) *outcome.Failure {
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

// runsToCompletion reports whether Helm waits for u: a Job or a Pod.
func runsToCompletion(u *unstructured.Unstructured) bool {
	return apply.IsJob(u) || isPod(u)
}

func isPod(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Pod"
}

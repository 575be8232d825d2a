// Package requests writes the requests people make of an instance in the cluster
// (cairn reconcile, suspend, resume, hold, release, rollback; the same from the
// dashboard): annotations of its ModuleInstance CR, each owned by a field manager
// of its own, apart from the manager that mirrors the CR from Git, so that a sync
// never removes them.
package requests

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// The field managers of the requests.
const (
	SuspendManager   = "cairn-suspend"
	HoldManager      = "cairn-hold"
	ReconcileManager = "cairn-reconcile"
)

// Annotate sets (value "": removes) the annotation key of ModuleInstance ns/name
// as manager, with c's identity.
func Annotate(ctx context.Context, c client.Client, ns, name, key, value, manager string) error {
	mi := &cairnv1.ModuleInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no ModuleInstance %s/%s in the cluster (an instance is created by its first sync)", ns, name)
		}
		return fmt.Errorf("failed to read ModuleInstance %s/%s: %w", ns, name, err)
	}
	v := any(nil)
	if value != "" {
		v = value
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	if err := c.Patch(ctx, mi, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(manager)); err != nil {
		return fmt.Errorf("failed to annotate ModuleInstance %s/%s: %w", ns, name, err)
	}
	return nil
}

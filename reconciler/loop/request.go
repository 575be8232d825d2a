package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// RequestFieldManager owns the reconcile request annotation on the Platform, apart
// from the manager that mirrors it from Git, so that a sync never removes it.
const RequestFieldManager = "cairn-reconcile"

// RequestSourceReconcile asks the controller's leader to fetch and sync the branch
// head at once (`cairn reconcile source`, or a push webhook that reached a replica
// that does not lead): it sets the cairn.dev/reconcile-requested-at annotation of
// the Platform CR to at, which the leader watches; the sync that handles it records
// the value in status.lastHandledReconcileAt. It returns the value set. One merge
// patch, no read: c may be a cached client of a replica that watches nothing.
func RequestSourceReconcile(ctx context.Context, c client.Client, at time.Time) (string, error) {
	p := &cairnv1.Platform{}
	p.Name = cairnv1.PlatformName
	value := at.UTC().Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{cairnv1.ReconcileRequestAnnotation: value}}})
	err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(RequestFieldManager))
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("no Platform %s in the cluster (it is created by the first sync)", cairnv1.PlatformName)
	case err != nil:
		return "", fmt.Errorf("failed to annotate Platform %s: %w", cairnv1.PlatformName, err)
	}
	return value, nil
}

package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/requests"
)

// RequestFieldManager owns the reconcile request annotation on the Platform, apart
// from the manager that mirrors it from Git, so that a sync never removes it.
const RequestFieldManager = requests.ReconcileManager

// RequestSourceReconcile asks the controller's leader to fetch and sync the branch
// head at once (`cairn reconcile source`, or a push webhook that reached a replica
// that does not lead): it sets the cairn.dev/reconcile-requested-at annotation of
// the Platform CR to at, which the leader watches; the sync that handles it records
// the value in status.lastHandledReconcileAt. It returns the value set.
func RequestSourceReconcile(ctx context.Context, c client.Client, at time.Time) (string, error) {
	value := at.UTC().Format(time.RFC3339Nano)
	return value, annotatePlatform(ctx, c, map[string]any{cairnv1.ReconcileRequestAnnotation: value}, RequestFieldManager)
}

// RequestPlans asks the controller's leader to plan the pull requests numbers (a
// pull request webhook that reached a replica that does not lead): it sets one
// plan.cairn.dev/pr-<n> annotation on the Platform CR for each, which the leader
// watches and removes once the plans are queued.
func RequestPlans(ctx context.Context, c client.Client, numbers []int, at time.Time) error {
	ann := map[string]any{}
	for _, n := range numbers {
		ann[cairnv1.PlanRequestAnnotationPrefix+strconv.Itoa(n)] = at.UTC().Format(time.RFC3339Nano)
	}
	return annotatePlatform(ctx, c, ann, RequestFieldManager)
}

// PlanRequests returns the pull requests that p's annotations ask plans of, sorted.
func PlanRequests(p *cairnv1.Platform) []int {
	var numbers []int
	for k := range p.Annotations {
		if n, err := strconv.Atoi(strings.TrimPrefix(k, cairnv1.PlanRequestAnnotationPrefix)); err == nil &&
			strings.HasPrefix(k, cairnv1.PlanRequestAnnotationPrefix) && n > 0 {
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	return numbers
}

// ForgetPlanRequests removes the plan request annotations of numbers from the
// Platform CR, as cairn's field manager (its own write: no watch acts on it).
func ForgetPlanRequests(ctx context.Context, c client.Client, numbers []int) error {
	ann := map[string]any{}
	for _, n := range numbers {
		ann[cairnv1.PlanRequestAnnotationPrefix+strconv.Itoa(n)] = nil
	}
	return annotatePlatform(ctx, c, ann, cairnv1.FieldManager)
}

// annotatePlatform merges annotations (a nil value removes one) into the Platform
// CR: one merge patch, no read, so c may be a cached client of a replica that
// watches nothing.
func annotatePlatform(ctx context.Context, c client.Client, annotations map[string]any, manager string) error {
	p := &cairnv1.Platform{}
	p.Name = cairnv1.PlatformName
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	err := c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(manager))
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("no Platform %s in the cluster (it is created by the first sync)", cairnv1.PlatformName)
	case err != nil:
		return fmt.Errorf("failed to annotate Platform %s: %w", cairnv1.PlatformName, err)
	}
	return nil
}

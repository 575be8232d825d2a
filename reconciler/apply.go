package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// applyObjects server-side applies the prepared objects in stages (CRDs and
// Namespaces first, waited on, then the rest). The API server validates every object
// with a dry-run before any is changed, so an invalid or denied object stops the
// whole instance before anything is written.
func applyObjects(ctx context.Context, m *ssa.ResourceManager, objects []*unstructured.Unstructured,
	timeout time.Duration) (*ssa.ChangeSet, error) {
	opts := ssa.DefaultApplyOptions()
	opts.ForceSelector = map[string]string{cairnv1.ForceAnnotation: "true"}
	opts.WaitInterval = time.Second
	opts.WaitTimeout = timeout
	cs, err := m.ApplyAllStaged(ctx, objects, opts)
	if err != nil {
		return cs, applyFailure(err)
	}
	return cs, nil
}

func applyFailure(err error) *Failure {
	var dryRun *ssaerrors.DryRunErr
	if errors.As(err, &dryRun) && ssaerrors.IsImmutableError(err) {
		return stalled(cairnv1.ReasonApplyFailed, fmt.Errorf(
			"%w (the change needs the object to be recreated: annotate it with %s: \"true\" to let cairn do so)",
			err, cairnv1.ForceAnnotation))
	}
	return classify(cairnv1.ReasonApplyFailed, err)
}

// waitHealthy waits until every applied object is Current (kstatus).
func waitHealthy(ctx context.Context, m *ssa.ResourceManager, cs *ssa.ChangeSet, timeout time.Duration) error {
	set := cs.ToObjMetadataSet()
	err := m.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: time.Second, Timeout: timeout, FailFast: true})
	if err != nil {
		return transient(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check failed: %w", err))
	}
	return nil
}

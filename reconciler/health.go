package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

// waitInstance runs the health phase of r (apply.CheckHealth) over the objects this
// sync applied (the API server's answers) and, when needed, the rest of its render, and records the verdict on
// its Healthy condition. The instance's timeout counts from the apply that started
// the wait; one sync waits at most Options.HealthWait of it.
func (in *revisionInput) waitInstance(ctx context.Context, c client.Client, r *instanceReconcile, applied []*unstructured.Unstructured) *outcome.Failure {
	v := apply.CheckHealth(ctx, c, apply.HealthCheck{
		OnWait:  func() { in.step(r.key(), "wait %s", r.key()) },
		Prior:   conditions.Get(r.live, cairnv1.HealthyCondition),
		Applied: applied, Rendered: r.objects,
		Timeout: in.timeout(r.mi), HandOver: in.e.opts.HealthWait,
		Watch: in.e.cluster.health,
	})
	v.Mark(r.live)
	if v.Interrupted {
		return interruption(ctx, r.key()) // says nothing of the objects: Healthy stays Unknown
	}
	return v.Failure
}

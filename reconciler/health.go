package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

// waitInstance waits for the instance's objects to be Current and records the verdict
// on its Healthy condition. It checks the objects this sync applied and, when the last
// check of the instance gave no verdict or failed (a wait that was cut short, timed
// out or handed over), every rendered object: a retry that applies nothing must not
// read Ready off objects nobody saw Current. The instance's timeout counts from the
// apply that started the wait; one sync waits at most Options.HealthWait of it, then
// hands the instance over as Progressing, and a later sync checks again.
func (in *revisionInput) waitInstance(ctx context.Context, c client.Client, r *instanceRun) *outcome.Failure {
	prior := conditions.Get(r.live, cairnv1.HealthyCondition)
	unsettled := prior != nil && prior.Status != metav1.ConditionTrue
	if len(r.applied.Live) == 0 && !unsettled {
		markHealthy(r.live, 0, nil)
		return nil
	}
	objects := r.applied.Live
	if unsettled {
		rest, err := apply.GetExisting(ctx, c, apply.NotAmong(r.objects, r.applied.Live))
		if err != nil {
			return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
		}
		objects = append(append([]*unstructured.Unstructured{}, objects...), rest...)
	}
	timeout, started := in.timeout(r.mi), time.Now()
	if len(r.applied.Live) == 0 && prior.Reason == cairnv1.ReasonProgressing {
		started = prior.LastTransitionTime.Time // a recheck: the clock runs from the apply
	} else {
		conditions.Delete(r.live, cairnv1.HealthyCondition) // a new wait: a new transition time
	}
	conditions.MarkUnknown(r.live, cairnv1.HealthyCondition, cairnv1.ReasonProgressing,
		"waiting for %d object(s) to be Current", len(apply.NotCurrent(objects)))
	left := time.Until(started.Add(timeout))
	wait, handOver := left, false
	if hw := in.e.opts.HealthWait; hw > 0 && hw < left {
		wait, handOver = hw, true
	}
	in.step(r.key(), "wait %s", r.key())
	err := apply.WaitHealthy(ctx, c, objects, wait)
	if interrupted(ctx) {
		return interruption(ctx, r.key()) // says nothing of the objects: Healthy stays Unknown
	}
	var nc *apply.NotCurrentError
	switch {
	case err == nil:
		markHealthy(r.live, len(objects), nil)
		return nil
	case errors.As(err, &nc) && handOver && ctx.Err() == nil:
		f := &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: fmt.Errorf(
			"applied; waiting for %d of %d object(s) to be Current (rechecked until %s): %s", len(nc.Pending),
			len(objects), started.Add(timeout).UTC().Format(time.RFC3339), apply.DescribeStatuses(nc.Pending))}
		conditions.MarkUnknown(r.live, cairnv1.HealthyCondition, cairnv1.ReasonProgressing, "%s", f.Err.Error())
		return f
	case errors.As(err, &nc):
		err = outcome.NewTransient(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check timed out after %s: %s",
			timeout, apply.DescribeStatuses(nc.Pending)))
	}
	markHealthy(r.live, len(objects), err)
	return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
}

// markHealthy records the health wait on the instance's Healthy condition: True when
// every object checked is Current, False with reason HealthCheckFailed naming the
// objects that are not.
func markHealthy(obj conditions.Setter, checked int, err error) {
	if err != nil {
		conditions.MarkFalse(obj, cairnv1.HealthyCondition, cairnv1.ReasonHealthCheckFailed, "%s", err.Error())
		return
	}
	if checked == 0 {
		conditions.MarkTrue(obj, cairnv1.HealthyCondition, cairnv1.ReasonSucceeded, "no object changed; each was Current when last applied")
		return
	}
	conditions.MarkTrue(obj, cairnv1.HealthyCondition, cairnv1.ReasonSucceeded, "%d applied object(s) are Current", checked)
}

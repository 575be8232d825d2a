package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

// Health polling starts fast (a Deployment is usually observed within a few hundred
// milliseconds) and backs off to healthMaxInterval.
const (
	healthFirstInterval = 100 * time.Millisecond
	healthMaxInterval   = 2 * time.Second
)

// waitHealthy waits until every object is Current (kstatus). The objects are the API
// server's responses to the apply, so kinds that are Current as soon as they exist
// (ServiceAccounts, ConfigMaps, Services...) cost no request at all; the others are
// read with one GET each per poll until they are Current, Failed, or wait has passed
// (then the error is a *notCurrentError).
func waitHealthy(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, wait time.Duration) error {
	pending := notCurrent(objects)
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	interval := healthFirstInterval
	for {
		if failed := failedObjects(pending); len(failed) > 0 {
			return outcome.NewStalled(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check failed: %s", strings.Join(failed, "; ")))
		}
		select {
		case <-ctx.Done():
			return &notCurrentError{after: wait, pending: pending}
		case <-time.After(interval):
		}
		interval = min(interval*2, healthMaxInterval)
		live, err := getAll(ctx, c, pending)
		if err != nil {
			if ctx.Err() != nil {
				return &notCurrentError{after: wait, pending: pending}
			}
			return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
		}
		pending = notCurrent(live)
		if len(pending) == 0 {
			return nil
		}
	}
}

// notCurrentError: objects were still not Current when a wait ended.
type notCurrentError struct {
	after   time.Duration
	pending []*unstructured.Unstructured
}

func (e *notCurrentError) Error() string {
	return fmt.Sprintf("not Current after %s: %s", e.after.Round(time.Second), describeStatuses(e.pending))
}

// notCurrent returns the objects whose kstatus is not Current.
func notCurrent(objects []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objects {
		if res, err := status.Compute(u); err != nil || res.Status != status.CurrentStatus {
			out = append(out, u)
		}
	}
	return out
}

func failedObjects(objects []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objects {
		if res, err := status.Compute(u); err == nil && res.Status == status.FailedStatus {
			out = append(out, apply.Describe(u)+": "+res.Message)
		}
	}
	return out
}

func describeStatuses(objects []*unstructured.Unstructured) string {
	parts := make([]string, 0, len(objects))
	for _, u := range objects {
		msg := "unknown"
		if res, err := status.Compute(u); err == nil {
			msg = string(res.Status) + ": " + res.Message
		}
		parts = append(parts, apply.Describe(u)+" ("+msg+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// getAll reads the current state of the objects, concurrently.
func getAll(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objects))
	errs := make([]error, len(objects))
	var wg sync.WaitGroup
	for i, u := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			errs[i] = c.Get(ctx, client.ObjectKeyFromObject(u), live)
			out[i] = live
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: failed to read for the health check: %w", apply.Describe(objects[i]), err)
		}
	}
	return out, nil
}

// waitInstance waits for the instance's objects to be Current and records the verdict
// on its Healthy condition. It checks the objects this sync applied and, when the last
// check of the instance gave no verdict or failed (a wait that was cut short, timed
// out or handed over), every rendered object: a retry that applies nothing must not
// read Ready off objects nobody saw Current. The instance's timeout counts from the
// apply that started the wait; one sync waits at most Options.HealthWait of it, then
// hands the instance over as Progressing, and a later sync checks again.
func (s *syncRun) waitInstance(ctx context.Context, c client.Client, r *instanceRun) *outcome.Failure {
	prior := conditions.Get(r.live, cairnv1.HealthyCondition)
	unsettled := prior != nil && prior.Status != metav1.ConditionTrue
	if len(r.appliedLive) == 0 && !unsettled {
		markHealthy(r.live, 0, nil)
		return nil
	}
	objects := r.appliedLive
	if unsettled {
		rest, err := getExisting(ctx, c, notAmong(r.objects, r.appliedLive))
		if err != nil {
			return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
		}
		objects = append(append([]*unstructured.Unstructured{}, objects...), rest...)
	}
	timeout, started := s.timeout(r.mi), time.Now()
	if len(r.appliedLive) == 0 && prior.Reason == cairnv1.ReasonProgressing {
		started = prior.LastTransitionTime.Time // a recheck: the clock runs from the apply
	} else {
		conditions.Delete(r.live, cairnv1.HealthyCondition) // a new wait: a new transition time
	}
	conditions.MarkUnknown(r.live, cairnv1.HealthyCondition, cairnv1.ReasonProgressing,
		"waiting for %d object(s) to be Current", len(notCurrent(objects)))
	left := time.Until(started.Add(timeout))
	wait, handOver := left, false
	if hw := s.e.opts.HealthWait; hw > 0 && hw < left {
		wait, handOver = hw, true
	}
	s.step(r.key(), "wait %s", r.key())
	err := waitHealthy(ctx, c, objects, wait)
	if interrupted(ctx) {
		return interruption(ctx, r.key()) // says nothing of the objects: Healthy stays Unknown
	}
	var nc *notCurrentError
	switch {
	case err == nil:
		markHealthy(r.live, len(objects), nil)
		return nil
	case errors.As(err, &nc) && handOver && ctx.Err() == nil:
		f := &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: fmt.Errorf(
			"applied; waiting for %d of %d object(s) to be Current (rechecked until %s): %s", len(nc.pending),
			len(objects), started.Add(timeout).UTC().Format(time.RFC3339), describeStatuses(nc.pending))}
		conditions.MarkUnknown(r.live, cairnv1.HealthyCondition, cairnv1.ReasonProgressing, "%s", f.Err.Error())
		return f
	case errors.As(err, &nc):
		err = outcome.NewTransient(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check timed out after %s: %s",
			timeout, describeStatuses(nc.pending)))
	}
	markHealthy(r.live, len(objects), err)
	return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
}

// getExisting reads the objects that exist (one a TTL controller deleted after it
// finished, such as a Job, has nothing left to wait for).
func getExisting(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objects))
	for _, u := range objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("%s: failed to read for the health check: %w", apply.Describe(u), err)
		default:
			out = append(out, live)
		}
	}
	return out, nil
}

// notAmong returns the objects of all that are not in some (by object id).
func notAmong(all, some []*unstructured.Unstructured) []*unstructured.Unstructured {
	seen := make(map[string]bool, len(some))
	for _, u := range some {
		seen[apply.ObjectID(u)] = true
	}
	var out []*unstructured.Unstructured
	for _, u := range all {
		if !seen[apply.ObjectID(u)] {
			out = append(out, u)
		}
	}
	return out
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

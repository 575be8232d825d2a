package apply

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
	"cairn.dev/cairn/reconciler/outcome"
)

// Health polling starts fast (a Deployment is usually observed within a few hundred
// milliseconds) and backs off to HealthMaxInterval.
const (
	HealthFirstInterval = 100 * time.Millisecond
	HealthMaxInterval   = 2 * time.Second
)

// WaitHealthy waits until every object is Current (kstatus). The objects are the API
// server's responses to the apply, so kinds that are Current as soon as they exist
// (ServiceAccounts, ConfigMaps, Services...) cost no request at all. The others are
// taken from w where it serves their kind, each time an event of theirs wakes the
// wait, and otherwise read with one GET each per poll, until they are Current, Failed,
// or wait has passed (then the error is a *NotCurrentError). The polls start at
// HealthFirstInterval and back off; when w serves every object waited for, a poll
// only reads by GET what its watch has not yet seen at the applied resourceVersion,
// every HealthMaxInterval.
func WaitHealthy(ctx context.Context, c client.Client, w *HealthWatch, objects []*unstructured.Unstructured, wait time.Duration) error {
	pending := NotCurrent(objects)
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	watch := w.waiter(ctx, pending)
	defer watch.done(pending)
	// What the watch has seen since the apply answered, before the first wait: an
	// object's last event may have come before the wait registered for it.
	if first, err := readForHealth(ctx, c, watch, pending, false); err == nil {
		if pending = NotCurrent(first); len(pending) == 0 {
			return nil
		}
	}
	interval := HealthFirstInterval
	for {
		if failed := failedObjects(pending); len(failed) > 0 {
			return outcome.NewStalled(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check failed: %s", strings.Join(failed, "; ")))
		}
		polls := watch.polls(pending)
		delay := interval
		if !polls {
			delay = HealthMaxInterval
		}
		polled := false
		select {
		case <-ctx.Done():
			return &NotCurrentError{After: wait, Pending: pending}
		case <-watch.woken:
		case <-time.After(delay):
			polled = true
		}
		if polled {
			interval = min(interval*2, HealthMaxInterval)
		}
		live, err := readForHealth(ctx, c, watch, pending, polled)
		if err != nil {
			if ctx.Err() != nil {
				return &NotCurrentError{After: wait, Pending: pending}
			}
			return outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
		}
		pending = NotCurrent(live)
		if len(pending) == 0 {
			return nil
		}
	}
}

// readForHealth reads the current state of objects: the watch's copy where it has the
// applied object; when polled, a GET of each of the others (objects the watch does not
// serve or has not seen at their applied resourceVersion); when woken by an event, the
// others stay as they were.
func readForHealth(ctx context.Context, c client.Client, watch *healthWaiter, objects []*unstructured.Unstructured, polled bool) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objects))
	var get []*unstructured.Unstructured
	var at []int
	for i, u := range objects {
		if cached := watch.cached(u); cached != nil {
			out[i] = cached
			continue
		}
		if !polled {
			out[i] = u // woken by another object's event: read at the next poll
			continue
		}
		get, at = append(get, u), append(at, i)
	}
	if len(get) == 0 {
		return out, nil
	}
	live, err := getAll(ctx, c, get)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = live[j]
	}
	return out, nil
}

// NotCurrentError is what WaitHealthy returns when objects were still not Current
// as the wait ended: the engine tells a wait to hand over from one that failed by it.
type NotCurrentError struct {
	// After is how long the wait lasted.
	After time.Duration
	// Pending are the objects, as last read, that were not Current.
	Pending []*unstructured.Unstructured
}

func (e *NotCurrentError) Error() string {
	return fmt.Sprintf("not Current after %s: %s", e.After.Round(time.Second), DescribeStatuses(e.Pending))
}

// NotCurrent returns the objects whose kstatus is not Current.
func NotCurrent(objects []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objects {
		if res, err := status.Compute(u); err != nil || res.Status != status.CurrentStatus {
			out = append(out, u)
		}
	}
	return out
}

// failedObjects describes the objects whose kstatus is Failed, each with its message.
func failedObjects(objects []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objects {
		if res, err := status.Compute(u); err == nil && res.Status == status.FailedStatus {
			out = append(out, Describe(u)+": "+res.Message)
		}
	}
	return out
}

// DescribeStatuses names each object with its kstatus and message, sorted, for the
// messages of a wait that ended with objects not Current.
func DescribeStatuses(objects []*unstructured.Unstructured) string {
	parts := make([]string, 0, len(objects))
	for _, u := range objects {
		msg := "unknown"
		if res, err := status.Compute(u); err == nil {
			msg = string(res.Status) + ": " + res.Message
		}
		parts = append(parts, Describe(u)+" ("+msg+")")
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
			return nil, fmt.Errorf("%s: failed to read for the health check: %w", Describe(objects[i]), err)
		}
	}
	return out, nil
}

// GetExisting reads the objects that exist (one a TTL controller deleted after it
// finished, such as a Job, has nothing left to wait for).
func GetExisting(ctx context.Context, c client.Client, objects []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objects))
	for _, u := range objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("%s: failed to read for the health check: %w", Describe(u), err)
		default:
			out = append(out, live)
		}
	}
	return out, nil
}

// NotAmong returns the objects of all that are not in some (by object id).
func NotAmong(all, some []*unstructured.Unstructured) []*unstructured.Unstructured {
	seen := make(map[string]bool, len(some))
	for _, u := range some {
		seen[ObjectID(u)] = true
	}
	var out []*unstructured.Unstructured
	for _, u := range all {
		if !seen[ObjectID(u)] {
			out = append(out, u)
		}
	}
	return out
}

// HealthCheck is what the health phase of one instance reads.
type HealthCheck struct {
	// OnWait, when set, is called as the wait starts (the engine's progress line).
	OnWait func()
	// Prior is the instance's Healthy condition as its last check left it (nil: none).
	Prior *metav1.Condition
	// Applied are the API server's answers to this sync's applies; Rendered are all
	// the objects the instance renders.
	Applied, Rendered []*unstructured.Unstructured
	// Timeout is the instance's spec.timeout, counted from the apply that started
	// the wait; HandOver is the most one sync waits of it (0: all of it), after
	// which the instance is handed over as Progressing and a later sync checks again.
	Timeout, HandOver time.Duration
	// Watch serves the wait where it can (nil: every object is read by GET).
	Watch *HealthWatch
}

// HealthVerdict is what the health phase decides.
type HealthVerdict struct {
	// Renew: the wait is a new one, so the Healthy condition is set afresh (a new
	// transition time, from which a recheck counts the timeout).
	Renew bool
	// Since is when the wait's clock started: this check's start when Renew, else
	// the transition time of the wait a recheck continues. Mark keeps it as the
	// transition time of a Progressing condition, whatever its message says, so
	// that every recheck counts spec.timeout from the same apply.
	Since time.Time
	// Healthy is the instance's Healthy condition after the check, set after
	// Waiting (the condition while the wait ran) when the wait ended with a verdict;
	// both nil when the check could not start.
	Waiting, Healthy *metav1.Condition
	// Failure is the instance's failure: nil when every object checked is Current;
	// Progressing when the wait was handed over; otherwise why the check failed.
	Failure *outcome.Failure
	// Interrupted: ctx was cancelled (not timed out) during the wait, which then
	// says nothing of the objects: Healthy stays as Waiting left it.
	Interrupted bool
}

// CheckHealth is the health phase of one instance: it checks the objects this sync
// applied and, when the last check gave no verdict or failed (a wait that was cut
// short, timed out or handed over), every rendered object, so that a retry that
// applies nothing never reads Ready off objects nobody saw Current. It returns the
// verdict; Mark records it on the instance.
func CheckHealth(ctx context.Context, c client.Client, h HealthCheck) HealthVerdict {
	unsettled := h.Prior != nil && h.Prior.Status != metav1.ConditionTrue
	if len(h.Applied) == 0 && !unsettled {
		return HealthVerdict{Healthy: healthyCondition(0, nil)}
	}
	objects := h.Applied
	if unsettled {
		rest, err := GetExisting(ctx, c, NotAmong(h.Rendered, h.Applied))
		if err != nil {
			return HealthVerdict{Failure: outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)}
		}
		objects = append(append([]*unstructured.Unstructured{}, objects...), rest...)
	}
	var v HealthVerdict
	started := time.Now()
	if len(h.Applied) == 0 && h.Prior.Reason == cairnv1.ReasonProgressing {
		started = h.Prior.LastTransitionTime.Time // a recheck: the clock runs from the apply
	} else {
		v.Renew = true
	}
	v.Since = started
	v.Waiting = &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionUnknown, Reason: cairnv1.ReasonProgressing,
		Message: fmt.Sprintf("waiting for %d object(s) to be Current", len(NotCurrent(objects)))}
	deadline := started.Add(h.Timeout)
	wait, handOver := time.Until(deadline), false
	if h.HandOver > 0 && h.HandOver < wait {
		wait, handOver = h.HandOver, true
	}
	if h.OnWait != nil {
		h.OnWait()
	}
	err := WaitHealthy(ctx, c, h.Watch, objects, wait)
	if errors.Is(ctx.Err(), context.Canceled) {
		v.Interrupted = true
		return v
	}
	var nc *NotCurrentError
	switch {
	case err == nil:
		v.Healthy = healthyCondition(len(objects), nil)
		return v
	case errors.As(err, &nc) && handOver && ctx.Err() == nil:
		v.Failure = &outcome.Failure{Kind: outcome.Progressing, Reason: cairnv1.ReasonProgressing, Err: fmt.Errorf(
			"applied; waiting for %d of %d object(s) to be Current (rechecked until %s): %s", len(nc.Pending),
			len(objects), deadline.UTC().Format(time.RFC3339), DescribeStatuses(nc.Pending))}
		v.Healthy = &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionUnknown,
			Reason: cairnv1.ReasonProgressing, Message: v.Failure.Err.Error()}
		return v
	case errors.As(err, &nc):
		err = outcome.NewTransient(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check timed out after %s: %s",
			h.Timeout, DescribeStatuses(nc.Pending)))
	}
	v.Healthy = healthyCondition(len(objects), err)
	v.Failure = outcome.Classify(cairnv1.ReasonHealthCheckFailed, err)
	return v
}

// Mark records v on obj's Healthy condition.
func (v HealthVerdict) Mark(obj conditions.Setter) {
	if v.Renew {
		conditions.Delete(obj, cairnv1.HealthyCondition)
	}
	for _, c := range []*metav1.Condition{v.Waiting, v.Healthy} {
		if c != nil {
			conditions.Set(obj, c.DeepCopy())
		}
	}
	// conditions.Set gives a condition whose message changed a new transition time;
	// a Progressing one keeps the clock of its wait (a recheck's deadline is counted
	// from it, and the message names the objects still pending, which change).
	if v.Since.IsZero() {
		return
	}
	all := obj.GetConditions()
	for i := range all {
		if c := &all[i]; c.Type == cairnv1.HealthyCondition && c.Status == metav1.ConditionUnknown && c.Reason == cairnv1.ReasonProgressing {
			c.LastTransitionTime = metav1.NewTime(v.Since.UTC().Truncate(time.Second))
		}
	}
	obj.SetConditions(all)
}

// healthyCondition is the Healthy condition after a wait: True when every object
// checked is Current, False with reason HealthCheckFailed naming the objects that
// are not.
func healthyCondition(checked int, err error) *metav1.Condition {
	c := &metav1.Condition{Type: cairnv1.HealthyCondition, Status: metav1.ConditionTrue, Reason: cairnv1.ReasonSucceeded}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, cairnv1.ReasonHealthCheckFailed, err.Error()
	case checked == 0:
		c.Message = "no object changed; each was Current when last applied"
	default:
		c.Message = fmt.Sprintf("%d applied object(s) are Current", checked)
	}
	return c
}

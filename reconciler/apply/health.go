package apply

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// (ServiceAccounts, ConfigMaps, Services...) cost no request at all; the others are
// read with one GET each per poll until they are Current, Failed, or wait has passed
// (then the error is a *NotCurrentError).
func WaitHealthy(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, wait time.Duration) error {
	pending := NotCurrent(objects)
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	interval := HealthFirstInterval
	for {
		if failed := failedObjects(pending); len(failed) > 0 {
			return outcome.NewStalled(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check failed: %s", strings.Join(failed, "; ")))
		}
		select {
		case <-ctx.Done():
			return &NotCurrentError{After: wait, Pending: pending}
		case <-time.After(interval):
		}
		interval = min(interval*2, HealthMaxInterval)
		live, err := getAll(ctx, c, pending)
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

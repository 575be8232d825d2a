package reconciler

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
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
// read with one GET each per poll until they are Current, Failed, or the timeout.
func waitHealthy(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, timeout time.Duration) error {
	pending := notCurrent(objects)
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	interval := healthFirstInterval
	for {
		if failed := failedObjects(pending); len(failed) > 0 {
			return stalled(cairnv1.ReasonHealthCheckFailed, fmt.Errorf("health check failed: %s", strings.Join(failed, "; ")))
		}
		select {
		case <-ctx.Done():
			return transient(cairnv1.ReasonHealthCheckFailed,
				fmt.Errorf("health check timed out after %s: %s", timeout, describeStatuses(pending)))
		case <-time.After(interval):
		}
		interval = min(interval*2, healthMaxInterval)
		live, err := getAll(ctx, c, pending)
		if err != nil {
			return classify(cairnv1.ReasonHealthCheckFailed, err)
		}
		pending = notCurrent(live)
		if len(pending) == 0 {
			return nil
		}
	}
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
			out = append(out, describe(u)+": "+res.Message)
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
		parts = append(parts, describe(u)+" ("+msg+")")
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
			return nil, fmt.Errorf("%s: failed to read for the health check: %w", describe(objects[i]), err)
		}
	}
	return out, nil
}

// markHealthy records the health wait on the instance's Healthy condition: True when
// every object this sync applied is Current, False with reason HealthCheckFailed
// naming the objects that are not.
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

package hooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler/apply"
)

// hookDeleteWait bounds the wait for a deleted hook object to be gone.
const hookDeleteWait = 2 * time.Minute

// errHookRunning is hookDone's answer for a Job or Pod that has not finished.
var errHookRunning = errors.New("still running")

// waitHook waits, within ctx, until a Job hook is complete or a Pod hook has
// succeeded, as Helm's WatchUntilReady does; other kinds are done once applied. A
// failed Job or Pod is an error with its reason and message.
func waitHook(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	if !runsToCompletion(u) {
		return nil
	}
	interval := apply.HealthFirstInterval
	for {
		live, err := apply.GetLive(ctx, c, u)
		switch {
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("failed to read %s: %w", apply.Describe(u), err)
		case err == nil && live == nil:
			return fmt.Errorf("%s was deleted while it ran", apply.Describe(u))
		case err == nil:
			if err := hookDone(live); !errors.Is(err, errHookRunning) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not finish in time: %w", apply.Describe(u), ctx.Err())
		case <-time.After(interval):
		}
		interval = min(interval*2, apply.HealthMaxInterval)
	}
}

// hookDone is nil for a complete Job or a succeeded Pod, errHookRunning for one
// still running, and an error with the reason and message of a failed one.
func hookDone(live *unstructured.Unstructured) error {
	if isPod(live) {
		return podDone(live)
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Complete":
			return nil
		case "Failed":
			return fmt.Errorf("Job failed: %v: %v", m["reason"], m["message"])
		}
	}
	return errHookRunning
}

// podDone is hookDone for a Pod: its phase, and for a failed one its message or the
// first terminated container's.
func podDone(live *unstructured.Unstructured) error {
	phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
	switch phase {
	case "Succeeded":
		return nil
	case "Failed":
		return fmt.Errorf("Pod failed: %s", podFailureMessage(live))
	}
	return errHookRunning
}

func podFailureMessage(live *unstructured.Unstructured) string {
	reason, _, _ := unstructured.NestedString(live.Object, "status", "reason")
	msg, _, _ := unstructured.NestedString(live.Object, "status", "message")
	if reason != "" || msg != "" {
		return reason + ": " + msg
	}
	statuses, _, _ := unstructured.NestedSlice(live.Object, "status", "containerStatuses")
	for _, s := range statuses {
		m, _ := s.(map[string]any)
		term, ok, _ := unstructured.NestedMap(m, "state", "terminated")
		if ok {
			// Not its termination message: what a container writes there is its own.
			return fmt.Sprintf("container %v exited with %v (%v)", m["name"], term["exitCode"], term["reason"])
		}
	}
	return "no reason given"
}

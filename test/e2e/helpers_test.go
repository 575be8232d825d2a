package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func isTrue(mi *cairnv1.ModuleInstance, t string) bool { return conditions.IsTrue(mi, t) }

func readyTime(mi *cairnv1.ModuleInstance) time.Time {
	if c := conditions.Get(mi, "Ready"); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// createdTime is when the Deployment of an instance was created.
func createdTime(t *testing.T, e *env, name string) time.Time {
	t.Helper()
	u := e.get("apps/v1", "Deployment", e.ns, name)
	if u == nil {
		t.Fatalf("deployment %s missing", name)
	}
	return u.GetCreationTimestamp().Time
}

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }

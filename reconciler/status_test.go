package reconciler

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
)

// TestSuspension: whether a suspended instance's CR says so already (nothing to
// write), and whether its dependents may go ahead (its last attempt succeeded, so
// its objects are there).
func TestSuspension(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name       string
		inGit      bool
		annotated  bool
		live       func(mi *cairnv1.ModuleInstance) // nil: no CR
		recorded   bool                             // suspendedAs
		satisfies  bool
		suspended  bool
		requestNew bool // reconcileRequested
	}{
		{name: "suspended in Git, recorded, after a success", inGit: true, suspended: true, recorded: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
				status.Suspended(mi, false)
			}},
		{name: "suspended in Git after a failure: its dependents wait", inGit: true, suspended: true, recorded: true,
			live: func(mi *cairnv1.ModuleInstance) {
				status.Failed(mi, "old", outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("bad")), now)
				status.Suspended(mi, false)
			}},
		{name: "suspended in Git, never synced", inGit: true, suspended: true},
		{name: "suspended in the cluster, recorded as suspended in Git: written again", annotated: true, suspended: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
				status.Suspended(mi, false)
			}},
		{name: "suspended in the cluster, recorded so", annotated: true, suspended: true, recorded: true, satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) {
				status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
				status.Suspended(mi, true)
			}},
		{name: "ready and not suspended", satisfies: true,
			live: func(mi *cairnv1.ModuleInstance) { status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok") }},
		{name: "a reconcile request not handled yet", satisfies: true, requestNew: true,
			live: func(mi *cairnv1.ModuleInstance) {
				status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
				mi.Annotations[cairnv1.ReconcileRequestAnnotation] = "2026-12-01T10:00:00Z"
				mi.Status.LastHandledReconcileAt = "2026-11-30T10:00:00Z"
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			mi.Spec.Suspend = tc.inGit
			r := &instanceState{instancePlan: instancePlan{mi: mi}}
			if tc.live != nil {
				r.was = mi.DeepCopy()
				r.was.Annotations = map[string]string{}
				if tc.annotated {
					r.was.Annotations[cairnv1.SuspendAnnotation] = "true"
				}
				tc.live(r.was)
				g.Expect(status.SuspendedAs(r.was)).To(Equal(tc.recorded), "suspendedAs")
				g.Expect(reconcileRequested(r.was)).To(Equal(tc.requestNew), "reconcileRequested")
			}
			g.Expect(r.suspended()).To(Equal(tc.suspended), "suspended")
			g.Expect(r.satisfiesDependents()).To(Equal(tc.satisfies), "satisfiesDependents")
			if tc.suspended && r.was != nil {
				g.Expect(r.result().Action).To(Equal(outcome.ActionSkipped))
			}
		})
	}
}

func TestMarkSourceReconcileHandled(t *testing.T) {
	g := NewWithT(t)
	p := &cairnv1.Platform{}
	p.Status.LastHandledReconcileAt = "before"
	markSourceReconcileHandled(p)
	g.Expect(p.Status.LastHandledReconcileAt).To(Equal("before"), "no request: left as it was")
	p.Annotations = map[string]string{cairnv1.ReconcileRequestAnnotation: "2026-12-01T10:00:00Z"}
	markSourceReconcileHandled(p)
	g.Expect(p.Status.LastHandledReconcileAt).To(Equal("2026-12-01T10:00:00Z"))
}

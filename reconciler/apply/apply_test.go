package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// The fake client of controller-runtime (v0.25) keeps managed fields and answers
// server-side apply patches, which is what Objects sends. What it cannot do is what
// only an API server does: a dry-run it answers without validating anything, it
// enforces no immutable field, and no controller writes the status of what it holds
// (a CRD is never Established). The tests here script those answers with
// interceptors; apiserver_test.go runs the same paths against a real API server.

var digestKey = []byte("a digest key of thirty-two bytes")

// requests records the writes that reach a fake client, in order, as "apply X",
// "dry-run X" or "delete X" (X as Describe names it), and answers some with what a
// test scripts: refuse returns the error an API server would give, or nil to let
// the request through. Applied CRDs are answered Established, as the API server's
// controller would make them.
type requests struct {
	mu     sync.Mutex
	log    []string
	refuse func(op string, u *unstructured.Unstructured) error
}

func (r *requests) record(op string, u *unstructured.Unstructured) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		if err := r.refuse(op, u); err != nil {
			return err
		}
	}
	r.log = append(r.log, op+" "+Describe(u))
	return nil
}

// writes is the log without the dry-runs.
func (r *requests) writes() []string {
	return slices.DeleteFunc(slices.Clone(r.log), func(s string) bool { return len(s) > 8 && s[:8] == "dry-run " })
}

func (r *requests) client(objects ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(objects...).WithReturnManagedFields().WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			po := &client.PatchOptions{}
			po.ApplyOptions(opts)
			op := "apply"
			if len(po.DryRun) > 0 {
				op = "dry-run"
			}
			u := obj.(*unstructured.Unstructured)
			if err := r.record(op, u); err != nil {
				return err
			}
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if op == "apply" && u.GetKind() == "CustomResourceDefinition" {
				u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"},
					map[string]any{"type": "NamesAccepted", "status": "True"}}}
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := r.record("delete", obj.(*unstructured.Unstructured)); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
}

func crd(group, kind string) *unstructured.Unstructured {
	return obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group, map[string]any{
		"spec": map[string]any{"group": group, "scope": "Namespaced", "names": map[string]any{"kind": kind, "plural": "widgets"}},
	})
}

func namespace(name string) *unstructured.Unstructured { return obj("v1", "Namespace", "", name, nil) }

func clusterRole(name string) *unstructured.Unstructured {
	return obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", name, map[string]any{"rules": []any{}})
}

// forcedCopy is u annotated cairn.dev/force: "true".
func forcedCopy(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetAnnotations(map[string]string{cairnv1.ForceAnnotation: "true"})
	return u
}

// actions reads a report as Describe(object) → action.
func actions(rep *Report) map[string]ssa.Action {
	out := map[string]ssa.Action{}
	for _, e := range rep.Changes.Entries {
		out[e.Subject] = e.Action
	}
	return out
}

func invalid(u *unstructured.Unstructured, msg string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: u.GroupVersionKind().Group, Kind: u.GetKind()}, u.GetName(),
		field.ErrorList{field.Invalid(field.NewPath("spec"), nil, msg)})
}

// TestObjects: what one apply sends to the API server and reports, object by object.
func TestObjects(t *testing.T) {
	cm := func(name, value string) *unstructured.Unstructured {
		return configMap("team-a", name, map[string]any{"k": value})
	}
	for _, tc := range []struct {
		name    string
		live    []client.Object
		last    []*unstructured.Unstructured // the objects as last applied (their inventory)
		pending bool                         // the last inventory has no hashes: recorded, never applied
		valid   map[string]bool              // ids the caller dry-ran already
		objects []*unstructured.Unstructured
		refuse  func(op string, u *unstructured.Unstructured) error
		// requests is the exact log of requests, when set; writes is the log without
		// the dry-runs, in order.
		requests []string
		writes   []string
		// dryRunsFirst: these objects (applied concurrently, in any order) are all
		// dry-run before the first of them is written.
		dryRunsFirst []string
		// dryRuns, when set, are all the dry-runs sent.
		dryRuns []string
		actions map[string]ssa.Action
		notes   []string
		err     string
		check   func(g *WithT, c client.Client, rep *Report)
	}{
		{name: "unchanged objects send nothing",
			last:    []*unstructured.Unstructured{cm("a", "1"), cm("b", "1")},
			objects: []*unstructured.Unstructured{cm("a", "1"), cm("b", "1")},
			actions: map[string]ssa.Action{"ConfigMap/team-a/a": ssa.UnchangedAction, "ConfigMap/team-a/b": ssa.UnchangedAction},
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Applied).To(BeEmpty())
				g.Expect(rep.Live).To(BeEmpty(), "nothing to wait for")
			}},
		{name: "one changed object is applied without a dry-run",
			live:     []client.Object{cm("a", "1"), cm("b", "1")},
			last:     []*unstructured.Unstructured{cm("a", "1"), cm("b", "1")},
			objects:  []*unstructured.Unstructured{cm("a", "2"), cm("b", "1")},
			requests: []string{"apply ConfigMap/team-a/a"},
			actions:  map[string]ssa.Action{"ConfigMap/team-a/a": ssa.ConfiguredAction, "ConfigMap/team-a/b": ssa.UnchangedAction},
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Applied).To(Equal(map[string]bool{"team-a_a__ConfigMap": true}))
				live := cm("a", "")
				g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(live), live)).To(Succeed())
				g.Expect(live.Object["data"]).To(Equal(map[string]any{"k": "2"}))
				g.Expect(live.GetManagedFields()).To(ContainElement(HaveField("Manager", cairnv1.FieldManager)))
			}},
		{name: "objects the caller dry-ran already are not dry-run again",
			objects: []*unstructured.Unstructured{cm("a", "1"), cm("b", "1"), cm("c", "1")},
			valid:   map[string]bool{"team-a_a__ConfigMap": true, "team-a_c__ConfigMap": true},
			dryRuns: []string{"dry-run ConfigMap/team-a/b"},
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Applied).To(HaveLen(3))
			}},
		{name: "an entry recorded before an apply that never came (no hash) is applied",
			last:     []*unstructured.Unstructured{cm("pending", "1")},
			pending:  true,
			objects:  []*unstructured.Unstructured{cm("pending", "1")},
			requests: []string{"apply ConfigMap/team-a/pending"},
			actions:  map[string]ssa.Action{"ConfigMap/team-a/pending": ssa.ConfiguredAction}},
		{name: "two changes are dry-run before the first write; new objects are reported created",
			objects:      []*unstructured.Unstructured{cm("a", "1"), cm("b", "1")},
			dryRunsFirst: []string{"ConfigMap/team-a/a", "ConfigMap/team-a/b"},
			actions:      map[string]ssa.Action{"ConfigMap/team-a/a": ssa.CreatedAction, "ConfigMap/team-a/b": ssa.CreatedAction}},
		{name: "a refused dry-run writes nothing",
			objects: []*unstructured.Unstructured{cm("a", "1"), cm("b", "bad")},
			refuse: func(op string, u *unstructured.Unstructured) error {
				if op == "dry-run" && u.GetName() == "b" {
					return invalid(u, "denied by a validating admission policy")
				}
				return nil
			},
			err: "validation before writing failed, nothing of it was written: ConfigMap/team-a/b dry-run failed",
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Untouched).To(BeTrue())
				g.Expect(rep.Applied).To(BeEmpty())
			}},
		{name: "an immutable change is refused unless forced",
			live:    []client.Object{cm("a", "1")},
			last:    []*unstructured.Unstructured{cm("a", "1")},
			objects: []*unstructured.Unstructured{cm("a", "2")},
			refuse: func(op string, u *unstructured.Unstructured) error {
				return invalid(u, "field is immutable")
			},
			err: "field is immutable (the change needs the object to be recreated: annotate it with cairn.dev/force: \"true\" to let cairn do so)",
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Applied).To(BeEmpty())
				g.Expect(rep.Untouched).To(BeFalse(), "an apply refused by the API server wrote nothing, but no validation said so")
			}},
		{name: "a forced immutable change is recreated",
			live:    []client.Object{cm("a", "1")},
			last:    []*unstructured.Unstructured{cm("a", "1")},
			objects: []*unstructured.Unstructured{forcedCopy(cm("a", "2"))},
			refuse: func() func(op string, u *unstructured.Unstructured) error {
				first := true
				return func(op string, u *unstructured.Unstructured) error {
					if op == "apply" && first {
						first = false
						return invalid(u, "field is immutable")
					}
					return nil
				}
			}(),
			requests: []string{"delete ConfigMap/team-a/a", "apply ConfigMap/team-a/a"},
			actions:  map[string]ssa.Action{"ConfigMap/team-a/a": ssa.ConfiguredAction},
			check: func(g *WithT, c client.Client, rep *Report) {
				live := cm("a", "")
				g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(live), live)).To(Succeed())
				g.Expect(live.Object["data"]).To(Equal(map[string]any{"k": "2"}))
			}},
		{name: "a forced immutable change passes its dry-run and is recreated beside the rest",
			live:    []client.Object{cm("a", "1")},
			last:    []*unstructured.Unstructured{cm("a", "1")},
			objects: []*unstructured.Unstructured{forcedCopy(cm("a", "2")), cm("b", "1")},
			refuse: func() func(op string, u *unstructured.Unstructured) error {
				applied := false
				return func(op string, u *unstructured.Unstructured) error {
					if u.GetName() == "a" && (op == "dry-run" || !applied) {
						applied = applied || op == "apply"
						return invalid(u, "field is immutable")
					}
					return nil
				}
			}(),
			actions: map[string]ssa.Action{"ConfigMap/team-a/a": ssa.ConfiguredAction, "ConfigMap/team-a/b": ssa.CreatedAction},
			check: func(g *WithT, c client.Client, rep *Report) {
				g.Expect(rep.Applied).To(HaveLen(2))
				live := cm("a", "")
				g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(live), live)).To(Succeed())
				g.Expect(live.Object["data"]).To(Equal(map[string]any{"k": "2"}))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &requests{refuse: tc.refuse}
			c := r.client(tc.live...)

			last := InventoryOf(tc.last, digestKey)
			if tc.pending {
				for id, e := range last {
					e.Hash = ""
					last[id] = e
				}
			}

			rep, err := Objects(context.Background(), manager(c), tc.objects, last, digestKey, 5*time.Second, tc.valid)

			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			}
			if tc.requests != nil {
				g.Expect(r.log).To(Equal(tc.requests))
			}
			if tc.err != "" && tc.writes == nil {
				g.Expect(r.writes()).To(BeEmpty(), "a failed apply wrote nothing")
			} else if tc.writes != nil {
				g.Expect(r.writes()).To(Equal(tc.writes))
			}
			if tc.dryRuns != nil {
				g.Expect(slices.DeleteFunc(slices.Clone(r.log), func(s string) bool { return !strings.HasPrefix(s, "dry-run ") })).To(Equal(tc.dryRuns))
			}
			if n := len(tc.dryRunsFirst); n > 0 {
				g.Expect(r.log).To(HaveLen(2 * n))
				var dryRuns, applies []string
				for _, d := range tc.dryRunsFirst {
					dryRuns, applies = append(dryRuns, "dry-run "+d), append(applies, "apply "+d)
				}
				g.Expect(r.log[:n]).To(ConsistOf(dryRuns))
				g.Expect(r.log[n:]).To(ConsistOf(applies))
			}
			if tc.actions != nil {
				g.Expect(actions(rep)).To(Equal(tc.actions))
			}
			g.Expect(rep.Notes).To(Equal(tc.notes))
			if tc.check != nil {
				tc.check(g, c, rep)
			}
		})
	}
}

// TestObjectsAppliesDefinitionsFirst: the first stage (CRDs, Namespaces, cluster
// roles) is written before anything else, and what needs it (an object in its
// Namespace, of its CRD's kind) is dry-run only once it is written; the other objects
// are dry-run before the first write.
func TestObjectsAppliesDefinitionsFirst(t *testing.T) {
	g := NewWithT(t)
	r := &requests{}
	c := r.client()
	deploy := obj("apps/v1", "Deployment", "team-a", "web", nil)
	inNew := configMap("team-b", "c", nil)
	widget := obj("example.com/v1", "Widget", "team-a", "w", nil)
	objects := []*unstructured.Unstructured{deploy, inNew, widget, namespace("team-b"), clusterRole("reader"), crd("example.com", "Widget")}

	rep, err := Objects(context.Background(), manager(c), objects, Inventory{}, digestKey, 5*time.Second, nil)

	g.Expect(err).NotTo(HaveOccurred())
	index := func(s string) int {
		i := slices.Index(r.log, s)
		g.Expect(i).NotTo(Equal(-1), s)
		return i
	}
	firstStage := []string{"Namespace/team-b", "ClusterRole/reader", "CustomResourceDefinition/widgets.example.com"}
	lastFirstWrite := 0
	for _, d := range firstStage {
		g.Expect(index("dry-run "+d)).To(BeNumerically("<", index("apply "+d)), d+" is dry-run before it is written")
		lastFirstWrite = max(lastFirstWrite, index("apply "+d))
	}
	g.Expect(index("dry-run Deployment/team-a/web")).To(BeNumerically("<", index("apply Namespace/team-b")),
		"what needs no definition is validated before the first write")
	for _, later := range []string{"ConfigMap/team-b/c", "Widget/team-a/w"} {
		g.Expect(index("dry-run "+later)).To(BeNumerically(">", lastFirstWrite), later+" is dry-run once its definition is written")
	}
	for _, rest := range []string{"Deployment/team-a/web", "ConfigMap/team-b/c", "Widget/team-a/w"} {
		g.Expect(index("apply "+rest)).To(BeNumerically(">", lastFirstWrite), rest+" is written after the first stage")
	}
	g.Expect(rep.Applied).To(HaveLen(6))
	g.Expect(actions(rep)).To(HaveEach(ssa.CreatedAction))
}

// TestObjectsTakesTheFirstStageBackWhenTheRestFails: a Namespace created to validate
// an object in it is deleted when that object fails its dry-run; a failure to establish
// the first stage is transient.
func TestObjectsTakesTheFirstStageBackWhenTheRestFails(t *testing.T) {
	g := NewWithT(t)
	r := &requests{refuse: func(op string, u *unstructured.Unstructured) error {
		if op == "dry-run" && u.GetNamespace() == "fresh" {
			return invalid(u, "exceeded quota")
		}
		return nil
	}}
	c := r.client()
	objects := []*unstructured.Unstructured{namespace("fresh"), configMap("fresh", "c", nil), configMap("team-a", "other", nil)}

	rep, err := Objects(context.Background(), manager(c), objects, Inventory{}, digestKey, 5*time.Second, nil)

	g.Expect(err).To(MatchError(ContainSubstring("ConfigMap/fresh/c dry-run failed")))
	g.Expect(err).To(MatchError(ContainSubstring("written first to validate the rest and taken back: Namespace/fresh")))
	g.Expect(r.writes()).To(Equal([]string{"apply Namespace/fresh", "delete Namespace/fresh"}))
	g.Expect(rep.Untouched).To(BeTrue())
	g.Expect(rep.Applied).To(BeEmpty())
	g.Expect(rep.Live).To(BeEmpty())
	g.Expect(apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Name: "fresh"}, namespace("fresh")))).To(BeTrue())
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))
}

// TestObjectsFollowsTheJobRules: a changed Job that ran is left as it is (or gone,
// after its TTL), with a note; forced, it is recreated; one that has not started is
// updated like any object.
func TestObjectsFollowsTheJobRules(t *testing.T) {
	rendered := func(image string) *unstructured.Unstructured {
		return obj("batch/v1", "Job", "team-a", "migrate", map[string]any{"spec": map[string]any{"template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "m", "image": image}}}}}})
	}
	withStatus := func(u *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
		u = u.DeepCopy()
		u.Object["status"] = status
		return u
	}
	ran := withStatus(rendered("v1"), map[string]any{"startTime": "2026-01-02T03:04:05Z", "succeeded": int64(1)})
	for _, tc := range []struct {
		name     string
		live     []client.Object
		last     []*unstructured.Unstructured
		object   *unstructured.Unstructured
		requests []string
		action   ssa.Action
		note     string
	}{
		{name: "ran: left as it is", live: []client.Object{ran}, last: []*unstructured.Unstructured{rendered("v1")},
			object: rendered("v2"), action: ssa.UnchangedAction, note: "Job/team-a/migrate has run: left as it is, not updated"},
		{name: "ran and removed by its TTL: not created again", last: []*unstructured.Unstructured{rendered("v1")},
			object: rendered("v2"), action: ssa.UnchangedAction, note: "Job/team-a/migrate ran and is gone (ttlSecondsAfterFinished): not created again"},
		{name: "ran, forced: recreated", live: []client.Object{ran}, last: []*unstructured.Unstructured{rendered("v1")},
			object: forcedCopy(rendered("v2")), requests: []string{"delete Job/team-a/migrate", "apply Job/team-a/migrate"}, action: ssa.ConfiguredAction},
		{name: "not started: updated", live: []client.Object{rendered("v1")}, last: []*unstructured.Unstructured{rendered("v1")},
			object: rendered("v2"), requests: []string{"apply Job/team-a/migrate"}, action: ssa.ConfiguredAction},
		{name: "unchanged: not read", live: []client.Object{ran}, last: []*unstructured.Unstructured{rendered("v1")},
			object: rendered("v1"), action: ssa.UnchangedAction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := &requests{}
			c := r.client(tc.live...)

			rep, err := Objects(context.Background(), manager(c), []*unstructured.Unstructured{tc.object}, InventoryOf(tc.last, digestKey), digestKey, time.Second, nil)

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.log).To(Equal(tc.requests))
			g.Expect(actions(rep)).To(Equal(map[string]ssa.Action{"Job/team-a/migrate": tc.action}))
			if tc.note == "" {
				g.Expect(rep.Notes).To(BeEmpty())
			} else {
				g.Expect(rep.Notes).To(ConsistOf(HavePrefix(tc.note)))
			}
			if len(tc.requests) > 0 {
				g.Expect(rep.Applied).To(Equal(map[string]bool{"team-a_migrate_batch_Job": true}))
			} else {
				g.Expect(rep.Applied).To(BeEmpty())
			}
		})
	}
}

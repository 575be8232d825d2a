package reconciler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// reconcileFixture is an instance whose render has settled, its CR as the
// revision step wrote it, and a revision state over controller-runtime's fake
// client that records each write.
type reconcileFixture struct {
	s       *RevisionState
	e       *instanceState
	c       client.Client
	rep     *countingReporter
	mu      sync.Mutex
	writes  []string
	refuse  func(op string, obj client.Object) error
	objects []*unstructured.Unstructured // rendered
}

// countingReporter counts the results reported.
type countingReporter struct {
	recordingReporter
	reports int
}

func (r *countingReporter) InstanceFinished(sha string, k report.InstanceKey, res InstanceResult) {
	r.reports++
	r.recordingReporter.InstanceFinished(sha, k, res)
}

func (f *reconcileFixture) record(op string, obj client.Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		if err := f.refuse(op, obj); err != nil {
			return err
		}
	}
	f.writes = append(f.writes, op+" "+obj.GetName())
	return nil
}

// newReconcileFixture: the instance team-a/web renders two ConfigMaps; synced
// makes its CR one that a sync at revision "old" left Ready with the first of them,
// and old puts its objects in the cluster.
func newReconcileFixture(t *testing.T, synced bool, old ...*unstructured.Unstructured) *reconcileFixture {
	t.Helper()
	key := []byte("digest-key")
	f := &reconcileFixture{objects: []*unstructured.Unstructured{
		dataMap("web-a", "one"), dataMap("web-b", "two"),
	}}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-1", Generation: 1,
		Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}}}
	mi.Spec.Module.Local = &cairnv1.LocalModule{Path: "modules/web"}
	if synced {
		status.Succeeded(mi, "old", cairnv1.ReasonSucceeded, "ok")
		mi.Status.History = []cairnv1.HistoryEntry{{Revision: "old", Result: cairnv1.HistoryReady, RenderDigest: "hmac-sha256:old"}}
	}
	placed := make([]*unstructured.Unstructured, len(f.objects))
	for i, u := range f.objects {
		placed[i] = u.DeepCopy()
		setOwnerLabels(placed[i], mi)
	}
	var left []*unstructured.Unstructured
	for _, u := range old {
		live := u.DeepCopy()
		setOwnerLabels(live, mi)
		left = append(left, live)
	}
	if synced {
		mi.Status.Inventory = &cairnv1.Inventory{Entries: apply.InventoryOf(append([]*unstructured.Unstructured{placed[0]}, left...), key).Entries()}
	}
	objs := []client.Object{mi.DeepCopy()}
	for _, u := range left {
		objs = append(objs, u)
	}
	f.c = fake.NewClientBuilder().WithScheme(Scheme).WithObjects(objs...).WithStatusSubresource(mi).WithReturnManagedFields().
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				po := &client.PatchOptions{}
				po.ApplyOptions(opts)
				op := "apply"
				if len(po.DryRun) > 0 {
					op = "dry-run"
				}
				if err := f.record(op, obj); err != nil {
					return err
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := f.record("delete", obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
		}).Build()
	f.rep = &countingReporter{recordingReporter: recordingReporter{instances: map[report.InstanceKey]InstanceResult{}}}
	engine := &Engine{cluster: &Cluster{client: f.c, managers: map[string]*ssa.ResourceManager{
		"": ssa.NewResourceManager(f.c, nil, ssa.Owner{Field: cairnv1.FieldManager, Group: "cairn.dev"})}},
		opts: Options{Reporter: f.rep, DefaultTimeout: 30 * time.Second, HealthWait: 5 * time.Second}}
	f.s = &RevisionState{
		revisionInput: revisionInput{e: engine, rev: Revision{SHA: "new"}, now: time.Now(), digestKey: key,
			platform: &cairnv1.Platform{}, set: &declarations.Set{}},
		clusterView: clusterView{live: map[string]*cairnv1.ModuleInstance{"team-a/web": mi}, namespaces: map[string]bool{},
			createdNamespaces: map[string]bool{}, managed: map[schema.GroupKind]managedObjects{}},
		verdicts: verdicts{conflicted: map[string]bool{}},
		byKey:    map[string]*instanceState{},
	}
	was := mi.DeepCopy()
	if !synced {
		was = nil
	}
	f.e = &instanceState{instancePlan: instancePlan{mi: mi.DeepCopy(), was: was, affected: true, why: "declaration changed"},
		placedRender: placedRender{rendered: &render.Result{Objects: placed, Digest: "hmac-sha256:render", ModuleDigest: "sha256:module"},
			objects: placed, shape: shapeOf(placed)},
		instanceVerdicts: instanceVerdicts{fast: true, oldLoaded: true, oldInv: apply.Inventory{}}}
	if synced {
		f.e.oldInv = apply.Inventory{}
		for _, en := range mi.Status.Inventory.Entries {
			f.e.oldInv[en.ID] = en
		}
	}
	f.e.mirrored = mi.DeepCopy()
	f.s.runs = []*instanceState{f.e}
	f.s.byKey["team-a/web"] = f.e
	return f
}

// dataMap is the ConfigMap team-a/name holding value.
func dataMap(name, value string) *unstructured.Unstructured {
	u := configMap("team-a", name)
	u.Object["data"] = map[string]any{"value": value}
	return u
}

// applies are the objects written by apply, in order (dry-runs and the CR's status
// aside).
func (f *reconcileFixture) applies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.writes), func(w string) bool { return w == "apply web" || strings.HasPrefix(w, "dry-run ") })
}

// TestInstanceReconcile is the instance reconcile (syncInstance) of one settled
// instance against the fake client: what it writes, the status it records and the
// result the revision keeps, for each way it ends.
func TestInstanceReconcile(t *testing.T) {
	stale := dataMap("web-old", "gone")
	forbidden := func(name string) func(op string, obj client.Object) error {
		return func(op string, obj client.Object) error {
			if op == "apply" && obj.GetName() == name {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, name, errors.New("no"))
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name    string
		synced  bool
		old     []*unstructured.Unstructured
		edit    func(f *reconcileFixture)
		action  outcome.Action
		reason  string
		applies []string
		// inventory is what the CR records after the reconcile; lastApplied its
		// last applied revision.
		inventory   []string
		lastApplied string
		counts      [4]int // applied, unchanged, created, pruned
		warnings    []string
		// history is the CR's history after it: "revision result", newest first
		// (default: the synced CR's, "old Ready").
		history []string
	}{{
		name: "a new instance: both objects applied, its inventory and Ready recorded", action: outcome.ActionCreated,
		reason: cairnv1.ReasonSucceeded, applies: []string{"apply web-a", "apply web-b"},
		inventory: []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap"}, lastApplied: "new", counts: [4]int{2, 0, 2, 0},
		history: []string{"new Ready"},
	}, {
		name: "a render's warnings reach the result and the Ready message", synced: true,
		edit:   func(f *reconcileFixture) { f.e.warnings = []string{"catalog skew"} },
		action: outcome.ActionUpdated, reason: cairnv1.ReasonSucceeded, applies: []string{"apply web-b"},
		inventory: []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap"}, lastApplied: "new", counts: [4]int{1, 1, 1, 0},
		warnings: []string{"catalog skew"}, history: []string{"new Ready", "old Ready"},
	}, {
		name: "an update: the object whose hash is unchanged is not applied again", synced: true, action: outcome.ActionUpdated,
		reason: cairnv1.ReasonSucceeded, applies: []string{"apply web-b"},
		inventory: []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap"}, lastApplied: "new", counts: [4]int{1, 1, 1, 0},
		history: []string{"new Ready", "old Ready"},
	}, {
		name: "stale objects pruned behind the guards", synced: true, old: []*unstructured.Unstructured{stale},
		edit: func(f *reconcileFixture) {
			f.e.prune = &prune.Set{Stale: apply.InventoryOf([]*unstructured.Unstructured{stale}, f.s.digestKey),
				Key: f.s.instanceLabel(f.e.mi), UID: "uid-1"}
		},
		action: outcome.ActionUpdated, reason: cairnv1.ReasonSucceeded, applies: []string{"apply web-b", "delete web-old"},
		inventory: []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap"}, lastApplied: "new", counts: [4]int{1, 1, 1, 1},
		history: []string{"new Ready", "old Ready"},
	}, {
		name: "a prune the guards refuse: applied, failed, the stale object kept in the inventory", synced: true,
		old: []*unstructured.Unstructured{stale},
		edit: func(f *reconcileFixture) {
			f.e.prune = &prune.Set{Stale: apply.InventoryOf([]*unstructured.Unstructured{stale}, f.s.digestKey), Key: f.s.instanceLabel(f.e.mi)}
			f.e.pruneErr = outcome.NewStalled(cairnv1.ReasonPruneGuard, errors.New("prune refused: 1 of 2 objects"))
		},
		action: outcome.ActionFailed, reason: cairnv1.ReasonPruneGuard, applies: []string{"apply web-b"},
		inventory:   []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap", "team-a_web-old__ConfigMap"},
		lastApplied: "old", counts: [4]int{1, 1, 1, 0}, history: []string{"new Failed", "old Ready"},
	}, {
		name: "a render that failed: nothing applied, the last good state kept", synced: true,
		edit: func(f *reconcileFixture) {
			f.e.failure = outcome.NewStalled(cairnv1.ReasonRenderFailed, errors.New("modules/web/main.cue:3: bad"))
		},
		action: outcome.ActionFailed, reason: cairnv1.ReasonRenderFailed,
		inventory: []string{"team-a_web-a__ConfigMap"}, lastApplied: "old",
	}, {
		name: "an apply the API server refuses: the last good state kept", synced: true,
		edit: func(f *reconcileFixture) { f.refuse = forbidden("web-b") }, action: outcome.ActionFailed, reason: cairnv1.ReasonApplyFailed,
		inventory: []string{"team-a_web-a__ConfigMap", "team-a_web-b__ConfigMap"}, lastApplied: "old", counts: [4]int{0, 1, 0, 0},
	}, {
		name: "its input was not written at this revision: nothing written", synced: true,
		edit: func(f *reconcileFixture) {
			f.e.mirrored, f.e.mirrorErr = nil, errors.New("failed to apply ModuleInstance team-a/web: conflict")
		},
		action: outcome.ActionFailed, reason: cairnv1.ReasonApplyFailed,
		inventory: []string{"team-a_web-a__ConfigMap"}, lastApplied: "old",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newReconcileFixture(t, tc.synced, tc.old...)
			if tc.edit != nil {
				tc.edit(f)
			}
			was, mirrored := f.e.was.DeepCopy(), f.e.mirrored.DeepCopy()
			failure, warnings := f.e.failure, slices.Clone(f.e.warnings)
			released := false
			f.s.syncInstance(context.Background(), f.e, func() { released = true })

			// The reconcile writes nothing of the instance's entry but its result.
			g.Expect(f.e.was).To(Equal(was), "the CR the revision step found")
			g.Expect(f.e.mirrored).To(Equal(mirrored), "the CR the revision step wrote")
			g.Expect(f.e.failure).To(BeIdenticalTo(failure))
			g.Expect(f.e.warnings).To(Equal(warnings))

			res := f.e.result()
			g.Expect(f.e.final).NotTo(BeNil(), "the revision keeps the result")
			g.Expect(res.Action).To(Equal(tc.action), res.Message)
			g.Expect(res.Reason).To(Equal(tc.reason))
			g.Expect([4]int{res.Applied, res.Unchanged, res.Created, res.Pruned}).To(Equal(tc.counts), "applied, unchanged, created, pruned: %+v", res)
			reported := f.rep.instances[report.InstanceKey{Namespace: "team-a", Name: "web"}]
			reported.Duration = res.Duration
			g.Expect(reported).To(Equal(res), "reported once done")
			g.Expect(f.rep.reports).To(Equal(1), "reported once")
			g.Expect(res.Warnings).To(Equal(tc.warnings))
			g.Expect(f.applies()).To(ConsistOf(tc.applies))
			g.Expect(f.e.objects).To(BeNil(), "the render is released")
			g.Expect(released).To(Equal(tc.action != outcome.ActionFailed), "its health wait gives its apply slot back")

			var got cairnv1.ModuleInstance
			g.Expect(f.c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: "web"}, &got)).To(Succeed())
			var ids []string
			for _, en := range got.Status.Inventory.Entries {
				ids = append(ids, en.ID)
			}
			g.Expect(ids).To(ConsistOf(tc.inventory))
			g.Expect(got.Status.LastAppliedRevision).To(Equal(tc.lastApplied))
			var history []string
			for _, h := range got.Status.History {
				history = append(history, h.Revision+" "+h.Result)
			}
			if tc.history == nil {
				tc.history = []string{"old Ready"}
			}
			g.Expect(history).To(Equal(tc.history), "a render enters the history once applied")
			if f.e.mirrorErr != nil {
				g.Expect(got.Status.LastAttemptedRevision).NotTo(Equal("new"), "no status written")
				return
			}
			g.Expect(got.Status.LastAttemptedRevision).To(Equal("new"))
			g.Expect(conditions.IsReady(&got)).To(Equal(tc.action != outcome.ActionFailed))
			for _, w := range tc.warnings {
				g.Expect(conditions.GetMessage(&got, "Ready")).To(ContainSubstring(w))
			}
			if tc.action == outcome.ActionFailed {
				g.Expect(conditions.GetReason(&got, "Ready")).To(Equal(tc.reason))
			}
		})
	}
}

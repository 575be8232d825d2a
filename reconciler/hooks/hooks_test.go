package hooks

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

func hookObject(apiVersion, kind, name string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "team-a"}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// TestHookDone: a Job is done when Complete, failed with its condition's reason
// and message when Failed; a Pod by its phase; anything else is still running.
func TestHookDone(t *testing.T) {
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"conditions": []any{map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}}}
	}
	for _, tc := range []struct {
		name string
		live *unstructured.Unstructured
		want string // "" done, "running", else a substring of the error
	}{
		{"job complete", hookObject("batch/v1", "Job", "j", cond("Complete", "True", "", "")), ""},
		{"job failed", hookObject("batch/v1", "Job", "j", cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")),
			"Job failed: DeadlineExceeded: Job was active longer than specified deadline"},
		{"job failed false", hookObject("batch/v1", "Job", "j", cond("Failed", "False", "", "")), "running"},
		{"job new", hookObject("batch/v1", "Job", "j", nil), "running"},
		{"pod succeeded", hookObject("v1", "Pod", "p", map[string]any{"phase": "Succeeded"}), ""},
		{"pod running", hookObject("v1", "Pod", "p", map[string]any{"phase": "Running"}), "running"},
		{"pod failed", hookObject("v1", "Pod", "p", map[string]any{"phase": "Failed", "containerStatuses": []any{
			map[string]any{"name": "c", "state": map[string]any{"terminated": map[string]any{"exitCode": int64(3), "reason": "Error"}}}}}),
			"container c exited with 3 (Error)"},
		{"pod failed without a reason", hookObject("v1", "Pod", "p", map[string]any{"phase": "Failed"}), "Pod failed: no reason given"},
		{"pod evicted", hookObject("v1", "Pod", "p", map[string]any{"phase": "Failed", "reason": "Evicted", "message": "low on memory"}),
			"Evicted: low on memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := hookDone(tc.live)
			switch tc.want {
			case "":
				g.Expect(err).NotTo(HaveOccurred())
			case "running":
				g.Expect(errors.Is(err, errHookRunning)).To(BeTrue(), "%v", err)
			default:
				g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}

// TestEvents: install on a first sync, upgrade when the render changed, none
// when it did not or when the chart has no hooks.
func TestEvents(t *testing.T) {
	hooks := []render.Hook{{Object: hookObject("v1", "Secret", "s", nil), Events: []string{render.HookPreInstall}}}
	applied := &cairnv1.ModuleInstance{}
	applied.Status.LastAppliedRevision, applied.Status.RenderDigest = "abc", "hmac-sha256:1"
	for _, tc := range []struct {
		name      string
		live      *cairnv1.ModuleInstance
		oldInv    apply.Inventory
		digest    string
		hooks     []render.Hook
		pre, post string
	}{
		{"new", nil, nil, "hmac-sha256:1", hooks, render.HookPreInstall, render.HookPostInstall},
		{"never applied", &cairnv1.ModuleInstance{}, nil, "hmac-sha256:1", hooks, render.HookPreInstall, render.HookPostInstall},
		{"inventory left", &cairnv1.ModuleInstance{}, apply.Inventory{"a_b__ConfigMap": {ID: "a_b__ConfigMap", Hash: "h"}}, "hmac-sha256:1", hooks,
			render.HookPreUpgrade, render.HookPostUpgrade},
		{"first sync failed", &cairnv1.ModuleInstance{}, apply.Inventory{"a_b__ConfigMap": {ID: "a_b__ConfigMap"}}, "hmac-sha256:1", hooks,
			render.HookPreInstall, render.HookPostInstall},
		{"changed", applied, nil, "hmac-sha256:2", hooks, render.HookPreUpgrade, render.HookPostUpgrade},
		{"unchanged", applied, nil, "hmac-sha256:1", hooks, "", ""},
		{"no hooks", nil, nil, "hmac-sha256:1", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pre, post := Events(tc.hooks, tc.digest, tc.live, tc.oldInv)
			g.Expect([]string{pre, post}).To(Equal([]string{tc.pre, tc.post}))
		})
	}
}

// TestNextRecord: the record keeps the delete hooks of the render and adds the
// install and upgrade hooks to those left before; it does not keep Ran.
func TestNextRecord(t *testing.T) {
	g := NewWithT(t)
	pre := render.Hook{Object: hookObject("batch/v1", "Job", "setup", nil), Events: []string{render.HookPreInstall, render.HookPreUpgrade}}
	del := render.Hook{Object: hookObject("v1", "ConfigMap", "bye", nil), Events: []string{render.HookPreDelete}}
	prev := Record{Left: []cairnv1.InventoryEntry{{ID: "team-a_old_batch_Job", Version: "batch/v1"}}, Ran: &PreRun{Event: render.HookPreInstall, Digest: "d1"}}
	rec := NextRecord(prev, []render.Hook{pre, del})
	g.Expect(rec.Delete).To(Equal([]render.Hook{del}))
	g.Expect(rec.Left).To(Equal([]cairnv1.InventoryEntry{
		{ID: "team-a_old_batch_Job", Version: "batch/v1"}, {ID: "team-a_setup_batch_Job", Version: "batch/v1"}}))
	g.Expect(rec.Ran).To(BeNil())
	g.Expect(NextRecord(Record{}, nil)).To(Equal(Record{}))
	g.Expect(NextRecord(Record{}, nil).Empty()).To(BeTrue())
}

// TestPlans: the hooks of the events asked for, event by event, in the order they
// run, each as one line of a plan.
func TestPlans(t *testing.T) {
	g := NewWithT(t)
	hooks := []render.Hook{
		{Object: hookObject("v1", "ConfigMap", "web-done", nil), Events: []string{render.HookPostInstall}, Source: "web/templates/done.yaml"},
		{Object: hookObject("v1", "Secret", "web-setup", nil), Events: []string{render.HookPreInstall}, Weight: -5},
		{Object: hookObject("v1", "ConfigMap", "web-bye", nil), Events: []string{render.HookPreDelete}},
	}
	plans := Plans(hooks, render.HookPreInstall, render.HookPostInstall)
	g.Expect(plans).To(Equal([]Plan{
		{Event: render.HookPreInstall, Weight: -5, Object: "Secret/team-a/web-setup"},
		{Event: render.HookPostInstall, Object: "ConfigMap/team-a/web-done", Source: "web/templates/done.yaml"},
	}))
	g.Expect(plans[0].String()).To(Equal("pre-install (weight -5) Secret/team-a/web-setup"))
	g.Expect(Plans(hooks)).To(BeEmpty())
}

// TestAfterEarlierRun: pre hooks that ran for this render are not run again, and
// the post hooks are those of the event that ran; another render runs both.
func TestAfterEarlierRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ran       *PreRun
		pre, post string
	}{
		{"none ran", nil, render.HookPreUpgrade, render.HookPostUpgrade},
		{"install ran for this render", &PreRun{Event: render.HookPreInstall, Digest: "d1"}, "", render.HookPostInstall},
		{"upgrade ran for this render", &PreRun{Event: render.HookPreUpgrade, Digest: "d1"}, "", render.HookPostUpgrade},
		{"ran for another render", &PreRun{Event: render.HookPreInstall, Digest: "d0"}, render.HookPreUpgrade, render.HookPostUpgrade},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pre, post := AfterEarlierRun(tc.ran, "d1", render.HookPreUpgrade, render.HookPostUpgrade)
			g.Expect([]string{pre, post}).To(Equal([]string{tc.pre, tc.post}))
		})
	}
}

const cairnNamespace = "cairn-system"

func webInstance() *cairnv1.ModuleInstance {
	return &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-web"}}
}

// TestRecordStore: the record is a Secret of cairn's namespace, written, read back
// and deleted; a missing one reads empty, an empty one is deleted rather than
// written, and a record that cannot be read or decoded is an error that names the
// instance.
func TestRecordStore(t *testing.T) {
	del := render.Hook{Object: hookObject("v1", "ConfigMap", "bye", nil), Events: []string{render.HookPreDelete}, Source: "web/templates/bye.yaml"}
	full := Record{Delete: []render.Hook{del}, Left: []cairnv1.InventoryEntry{{ID: "team-a_setup_batch_Job", Version: "batch/v1"}},
		Ran: &PreRun{Event: render.HookPreInstall, Digest: "d1"}}
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cairnNamespace, Name: "cairn-hooks-team-a.web"},
		Data: map[string][]byte{secretKey: []byte("not gzip")}}
	for _, tc := range []struct {
		name    string
		objects []client.Object
		failGet bool
		store   *Record // written before the load, when set
		want    Record
		wantErr string
		secret  bool // whether the Secret is there after
	}{
		{name: "none", want: Record{}},
		{name: "round trip", store: &full, want: full, secret: true},
		{name: "empty deletes", objects: []client.Object{broken.DeepCopy()}, store: &Record{}, want: Record{}},
		{name: "undecodable", objects: []client.Object{broken.DeepCopy()}, wantErr: "failed to decode the hook record of team-a/web", secret: true},
		{name: "unreadable", failGet: true, wantErr: "failed to read the hook record of team-a/web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			b := fake.NewClientBuilder().WithObjects(tc.objects...)
			if tc.failGet {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return errors.New("connection refused")
				}})
			}
			c := b.Build()
			mi := webInstance()
			if tc.store != nil {
				g.Expect(StoreRecord(ctx, c, cairnNamespace, mi, *tc.store)).To(Succeed())
			}
			rec, err := LoadRecord(ctx, c, cairnNamespace, mi)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(rec).To(Equal(tc.want))
			}
			if tc.failGet {
				return
			}
			err = c.Get(ctx, client.ObjectKey{Namespace: cairnNamespace, Name: SecretName(mi)}, &corev1.Secret{})
			if tc.secret {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(RemoveRecord(ctx, c, cairnNamespace, mi)).To(Succeed())
				err = c.Get(ctx, client.ObjectKey{Namespace: cairnNamespace, Name: SecretName(mi)}, &corev1.Secret{})
			}
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			g.Expect(RemoveRecord(ctx, c, cairnNamespace, mi)).To(Succeed(), "a record that is not there is removed")
		})
	}
}

// labelled is u with the labels of owner's objects (or another instance's).
func labelled(u *unstructured.Unstructured, owner Owner) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetLabels(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue, cairnv1.InstanceLabel: owner.Key, cairnv1.InstanceUIDLabel: owner.UID})
	return u
}

// TestRun: the hooks of one event are applied in order, as the instance's; those
// with hook-succeeded are deleted once all succeeded; a hook object of an earlier
// run is replaced when the hook has before-hook-creation; a failed hook stops the
// run, is deleted when it has hook-failed, and fails the instance.
func TestRun(t *testing.T) {
	owner := OwnerOf(webInstance())
	other := Owner{Key: "team-b.api", UID: "uid-api"}
	cm := func(name string, events []string, weight int, policies ...string) render.Hook {
		return render.Hook{Object: labelled(hookObject("v1", "ConfigMap", name, nil), owner), Events: events, Weight: weight,
			DeletePolicies: policies, Source: "web/templates/" + name + ".yaml"}
	}
	pre := []string{render.HookPreInstall}
	setup := cm("setup", pre, -1, render.HookSucceeded)
	seed := cm("seed", pre, 1) // before-hook-creation, as a hook that names no policy
	done := cm("done", []string{render.HookPostInstall}, 0)
	job := render.Hook{Object: labelled(hookObject("batch/v1", "Job", "migrate", nil), owner), Events: pre,
		DeletePolicies: []string{render.HookSucceeded}, Source: "web/templates/migrate.yaml"}
	seedOfEarlierRun := seed.Object.DeepCopy()
	seedOfEarlierRun.Object["data"] = map[string]any{"run": "earlier"}
	for _, tc := range []struct {
		name      string
		hooks     []render.Hook
		live      []client.Object
		failApply string // the hook object whose apply fails
		ran       int
		reason    string // "" succeeded
		kind      outcome.Kind
		message   string
		there     []string // the ConfigMaps there after
	}{
		{name: "in order", hooks: []render.Hook{seed, done, setup}, ran: 2, there: []string{"seed"}},
		{name: "none of the event", hooks: []render.Hook{done}},
		{name: "earlier run replaced", hooks: []render.Hook{seed}, live: []client.Object{seedOfEarlierRun}, ran: 1, there: []string{"seed"}},
		{name: "another's object", hooks: []render.Hook{setup, seed}, live: []client.Object{labelled(setup.Object, other)},
			reason: cairnv1.ReasonOwnershipConflict, kind: outcome.Stalled,
			message: "pre-install hook ConfigMap/team-a/setup (web/templates/setup.yaml) failed: ConfigMap/team-a/setup already exists and is not this instance's",
			there:   []string{"setup"}},
		{name: "apply fails", hooks: []render.Hook{setup, seed}, failApply: "seed", ran: 1, reason: cairnv1.ReasonHookFailed,
			message: "pre-install hook ConfigMap/team-a/seed (web/templates/seed.yaml) failed: failed to apply ConfigMap/team-a/seed"},
		{name: "job of an earlier run kept", hooks: []render.Hook{job}, live: []client.Object{job.Object.DeepCopy()},
			reason: cairnv1.ReasonHookFailed, message: "exists from an earlier run and its delete policies (hook-succeeded) do not delete it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(tc.live...).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if obj.GetName() == tc.failApply {
						return apierrors.NewForbidden(corev1.Resource("configmaps"), obj.GetName(), errors.New("denied"))
					}
					return c.Patch(ctx, obj, patch, opts...)
				}}).Build()
			ran, f := Run(ctx, c, owner, render.HookPreInstall, tc.hooks)
			g.Expect(ran).To(Equal(tc.ran))
			if tc.reason == "" {
				g.Expect(f).To(BeNil())
			} else {
				g.Expect(f).NotTo(BeNil())
				g.Expect(f.Reason).To(Equal(tc.reason))
				if tc.kind != "" {
					g.Expect(f.Kind).To(Equal(tc.kind))
				}
				g.Expect(f.Error()).To(ContainSubstring(tc.message))
			}
			var cms corev1.ConfigMapList
			g.Expect(c.List(ctx, &cms)).To(Succeed())
			var there []string
			for _, cm := range cms.Items {
				there = append(there, cm.Name)
				g.Expect(cm.Data).NotTo(HaveKey("run"), "the object of an earlier run is replaced")
			}
			g.Expect(there).To(ConsistOf(tc.there))
		})
	}
}

// TestDeleteLeft: the hook objects an instance left are deleted when they are
// still the instance's; another's, or one already gone, is left alone.
func TestDeleteLeft(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	owner := OwnerOf(webInstance())
	mine := labelled(hookObject("v1", "ConfigMap", "mine", nil), owner)
	theirs := labelled(hookObject("v1", "ConfigMap", "theirs", nil), Owner{Key: "team-b.api"})
	c := fake.NewClientBuilder().WithObjects(mine, theirs).Build()
	var left []cairnv1.InventoryEntry
	for _, name := range []string{"mine", "theirs", "gone"} {
		left = append(left, cairnv1.InventoryEntry{ID: apply.ObjectID(hookObject("v1", "ConfigMap", name, nil)), Version: "v1"})
	}
	g.Expect(DeleteLeft(ctx, c, owner, left)).To(Succeed())
	var cms corev1.ConfigMapList
	g.Expect(c.List(ctx, &cms)).To(Succeed())
	g.Expect(cms.Items).To(ConsistOf(HaveField("Name", "theirs")))
}

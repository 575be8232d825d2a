package reconciler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// TestRendersKnowTheirTenant: an instance declared under a tenant's paths renders
// as that tenant (its renders take the worker slots in turn with the other
// tenants'), one of the platform team's as "".
func TestRendersKnowTheirTenant(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tenantOf(set, set.Instance("team-a", "web"))).To(Equal("team-a"))
	g.Expect(tenantOf(set, set.Instance("ops", "tool"))).To(BeEmpty())

	s := &RevisionState{revisionInput: revisionInput{set: set}}
	for _, mi := range set.Instances {
		s.runs = append(s.runs, &instanceState{instancePlan: instancePlan{mi: mi, affected: true}})
	}
	byTenant := s.affectedByTenant()
	g.Expect(byTenant).To(HaveLen(2))
	g.Expect(byTenant["team-a"]).To(HaveLen(1))
	g.Expect(byTenant["team-a"][0].mi.Name).To(Equal("web"))
	g.Expect(byTenant[""][0].mi.Name).To(Equal("tool"))
}

// TestARenderThatWaitedForBusyWorkersIsRetried: a render whose deadline passed
// while every worker was busy with other renders fails as transient (retried with
// backoff, whatever the next commit); one whose own build ran out of time, or
// broke a limit, stalls until its input changes.
func TestARenderThatWaitedForBusyWorkersIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	busy := &render.Error{Reason: render.ReasonRenderTimeout,
		Err: fmt.Errorf("render exceeded its deadline while waiting for a render worker: %w (%w)", render.ErrWorkersBusy, ctx.Err())}
	f := renderFailure("team-b/web", fmt.Errorf("kustomize directory apps/web: %w", busy))
	g.Expect(f.Kind).To(Equal(outcome.Transient))
	g.Expect(f.Reason).To(Equal(render.ReasonRenderTimeout))
	g.Expect(f.Err.Error()).To(HavePrefix("failed to render team-b/web: kustomize directory apps/web: "))

	own := &render.Error{Reason: render.ReasonRenderTimeout, Err: errors.New("render exceeded its deadline during the kustomize build")}
	g.Expect(renderFailure("team-a/slow", own).Kind).To(Equal(outcome.Stalled))
	limit := &render.Error{Reason: render.ReasonLimitExceeded, Err: errors.New("memory budget")}
	g.Expect(renderFailure("team-a/big", limit).Kind).To(Equal(outcome.Stalled))
}

// fakeRenderer answers every render with res or err (or panics, with panics) and
// keeps the requests.
type fakeRenderer struct {
	res    *render.Result
	err    error
	panics bool
	reqs   []render.Request
}

func (f *fakeRenderer) Render(_ context.Context, req render.Request) (*render.Result, error) {
	f.reqs = append(f.reqs, req)
	if f.panics {
		var objects []*unstructured.Unstructured
		_ = objects[len(f.reqs)] // a bug in the renderer
	}
	return f.res, f.err
}

// renderFixture is a sync of limitsRepo (with values on team-a/web) whose renders go
// to renderer, through a render cache of its own.
func renderFixture(t *testing.T, renderer Renderer) *RevisionState {
	t.Helper()
	dir := t.TempDir()
	for name, f := range limitsRepo {
		data := f.Data
		if name == "tenants/team-a/web.yaml" {
			data = append(data, []byte("  values: {replicas: 2}\n")...)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := gitsource.ReadDir(dir, gitsource.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := declarations.Load(tree, declarations.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(nil, renderer, Options{RenderCacheDir: t.TempDir()})
	return &RevisionState{revisionInput: revisionInput{e: e, rev: Revision{SHA: "abc", Tree: tree}, root: tree, set: set, platform: set.Platform}}
}

// TestRenderPhase: the render phase of one instance as a function of its
// declaration and the renderer: what it asks the renderer, what it returns, and
// the type of its failure.
func TestRenderPhase(t *testing.T) {
	objects := []*unstructured.Unstructured{testobj.Object("v1", "ConfigMap", "team-a", "web")}
	for _, tc := range []struct {
		name   string
		res    *render.Result
		err    error
		panics bool
		kind   outcome.Kind // of the failure; "" for none
		reason string
		msg    string
	}{
		{name: "a render", res: &render.Result{Objects: objects, Digest: "sha256:d"}},
		{name: "a module that does not evaluate stalls until its input changes",
			err:  &render.Error{Reason: cairnv1.ReasonRenderFailed, Err: errors.New("main.cue:3: undefined field")},
			kind: outcome.Stalled, reason: cairnv1.ReasonRenderFailed, msg: "failed to render team-a/web: main.cue:3: undefined field"},
		{name: "a render over its memory budget stalls",
			err:  &render.Error{Reason: render.ReasonLimitExceeded, Err: errors.New("memory budget of 64Mi")},
			kind: outcome.Stalled, reason: cairnv1.ReasonLimitExceeded},
		{name: "a render that waited for busy workers is retried",
			err:  &render.Error{Reason: render.ReasonRenderTimeout, Err: fmt.Errorf("waiting for a render worker: %w", render.ErrWorkersBusy)},
			kind: outcome.Transient, reason: render.ReasonRenderTimeout},
		{name: "a panic is the instance's failure, not the process's", panics: true,
			kind: outcome.Stalled, reason: cairnv1.ReasonInternalError,
			msg: "internal error during the render of team-a/web: runtime error: index out of range [1] with length 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fake := &fakeRenderer{res: tc.res, err: tc.err, panics: tc.panics}
			s := renderFixture(t, fake)
			mi := s.set.Instance("team-a", "web")

			out, f := s.renderOne(context.Background(), mi, "sha256:module")

			g.Expect(fake.reqs).To(HaveLen(1))
			req := fake.reqs[0]
			g.Expect(req.Namespace).To(Equal("team-a"))
			g.Expect(string(req.Values)).To(MatchJSON(`{"replicas": 2}`))
			g.Expect(req.Limits.Memory).To(Equal(int64(64<<20)), "the tenant's limit")
			g.Expect(out.artifacts).To(BeEmpty(), "a local module has no OCI artifact")
			g.Expect(out.cached).To(BeFalse())
			if tc.kind == "" {
				g.Expect(f).To(BeNil())
				g.Expect(out.res.Objects).To(Equal(objects))
				g.Expect(out.took).To(BeNumerically(">", 0))
				again, f := s.renderOne(context.Background(), mi, "sha256:module")
				g.Expect(f).To(BeNil())
				g.Expect(again.cached).To(BeTrue(), "the same input renders once")
				g.Expect(fake.reqs).To(HaveLen(1))
				_, _ = s.renderOne(context.Background(), mi, "sha256:other-module")
				g.Expect(fake.reqs).To(HaveLen(2), "another module content renders again")
				return
			}
			g.Expect(out.res).To(BeNil())
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Kind).To(Equal(tc.kind))
			g.Expect(f.Reason).To(Equal(tc.reason))
			g.Expect(f.Err.Error()).To(ContainSubstring(tc.msg))
		})
	}
}

// TestPlacementPhase: the placement of one instance's render as a function of the
// render, the Platform's tenants and the kinds the cluster serves: the objects it
// returns placed and labelled, or the typed reason they may not be applied.
func TestPlacementPhase(t *testing.T) {
	configMap := func(ns, name string) *unstructured.Unstructured {
		u := testobj.Object("v1", "ConfigMap", "", name)
		u.SetNamespace(ns)
		return u
	}
	for _, tc := range []struct {
		name     string
		instance string // namespace/name in limitsRepo
		objects  []*unstructured.Unstructured
		hooks    []*unstructured.Unstructured
		secrets  []string // spec.secrets of the instance
		claimed  bool     // another instance of the revision claimed the objects first
		reason   string   // of the failure; "" for none
		message  string
	}{
		{name: "a namespaced object without a namespace goes to the instance's", instance: "team-a/web",
			objects: []*unstructured.Unstructured{configMap("", "settings")}},
		{name: "a tenant's object in a namespace of the tenant's", instance: "team-a/web",
			objects: []*unstructured.Unstructured{configMap("team-a", "settings")}},
		{name: "a tenant's object in another namespace is denied", instance: "team-a/web",
			objects: []*unstructured.Unstructured{configMap("ops", "settings")},
			reason:  cairnv1.ReasonNamespaceDenied, message: `ConfigMap/ops/settings: namespace "ops" is not one of tenant team-a's namespaces`},
		{name: "a cluster-scoped kind the tenant may not write is refused", instance: "team-a/web",
			objects: []*unstructured.Unstructured{testobj.Object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin")},
			reason:  cairnv1.ReasonObjectForbidden, message: "cluster-scoped kind ClusterRole.rbac.authorization.k8s.io is not in tenant team-a's clusterResources"},
		{name: "a hook goes nowhere an object may not", instance: "team-a/web",
			objects: []*unstructured.Unstructured{configMap("", "settings")}, hooks: []*unstructured.Unstructured{configMap("ops", "migrate")},
			reason: cairnv1.ReasonNamespaceDenied, message: "ConfigMap/ops/migrate"},
		{name: "nothing of cairn's API group", instance: "ops/tool",
			objects: []*unstructured.Unstructured{testobj.Object("cairn.dev/v1alpha1", "ModuleInstance", "", "other")},
			reason:  cairnv1.ReasonObjectForbidden, message: "objects of cairn's own API group"},
		{name: "a generated Secret named as a rendered object", instance: "team-a/web", secrets: []string{"settings"},
			objects: []*unstructured.Unstructured{testobj.Object("v1", "Secret", "", "settings")},
			reason:  cairnv1.ReasonSecretConflict, message: "settings"},
		{name: "an object another instance of the revision claimed first", instance: "ops/tool", claimed: true,
			objects: []*unstructured.Unstructured{configMap("ops", "shared")},
			reason:  cairnv1.ReasonOwnershipConflict, message: "ConfigMap/ops/shared is rendered by this instance and by ops/first in the same revision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := renderFixture(t, &fakeRenderer{})
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
			mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
			mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
			mapper.Add(schema.GroupVersionKind{Group: "cairn.dev", Version: "v1alpha1", Kind: "ModuleInstance"}, meta.RESTScopeNamespace)
			s.kinds = newMissMemo(mapper)
			s.digestKey = []byte("key")
			s.claims = map[string]*instanceState{}
			ns, name := splitKey(tc.instance)
			r := &instanceState{instancePlan: instancePlan{mi: s.set.Instance(ns, name)}}
			for _, sec := range tc.secrets {
				r.mi.Spec.Secrets = append(r.mi.Spec.Secrets, cairnv1.GeneratedSecret{Name: sec})
			}
			if tc.claimed {
				first := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "first"}}}}
				g.Expect(s.claimObjects(first, tc.objects)).To(BeNil())
			}
			res := &render.Result{Objects: tc.objects, Digest: "sha256:render", Warnings: []string{"skew"}}
			for _, h := range tc.hooks {
				res.Hooks = append(res.Hooks, render.Hook{Object: h, Events: []string{"pre-install"}})
			}

			p, f := s.place(context.Background(), r, res, nil)

			if tc.reason != "" {
				g.Expect(f).NotTo(BeNil())
				g.Expect(f.Kind).To(Equal(outcome.Stalled))
				g.Expect(f.Reason).To(Equal(tc.reason))
				g.Expect(f.Err.Error()).To(ContainSubstring(tc.message))
				g.Expect(p.objects).To(BeEmpty(), "nothing placed to apply")
				return
			}
			g.Expect(f).To(BeNil())
			g.Expect(p.rendered.Digest).To(HavePrefix("hmac-sha256:"), "the digest is keyed")
			g.Expect(p.warnings).To(Equal([]string{"skew"}))
			g.Expect(p.published).To(BeNil(), "the Platform publishes nothing")
			for _, u := range p.objects {
				g.Expect(u.GetNamespace()).To(Equal(ns))
				g.Expect(u.GetLabels()).To(HaveKeyWithValue(cairnv1.InstanceLabel, cairnv1.InstanceKey(ns, name)))
			}
			g.Expect(s.claims).To(HaveKeyWithValue(apply.ObjectID(p.objects[0]), r), "claimed for the instance")
		})
	}
}

package reconciler

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
)

func releaseFixture() []*unstructured.Unstructured {
	obj := func(o map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: o} }
	return []*unstructured.Unstructured{
		obj(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets.example.com", "labels": map[string]any{"a": "b"}},
			"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
				"names":    map[string]any{"kind": "Widget", "plural": "widgets"},
				"versions": []any{map[string]any{"name": "v1", "schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}}}}),
		obj(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "team-a", "annotations": map[string]any{"x": "y"}},
			"spec":     map[string]any{"replicas": int64(2)}}),
		obj(map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "creds", "namespace": "team-a"}, "data": map[string]any{"password": "c2VjcmV0"}}),
		obj(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "reader"}, "rules": []any{}}),
		obj(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "team-a"}, "spec": map[string]any{"size": "L"}}),
	}
}

// The verdicts over a revision (moves, contracts, scopes, the prune caps) read an
// instance's shape once its render is released: they must decide as on the render.
func TestShapeOfKeepsWhatTheVerdictsRead(t *testing.T) {
	g := NewWithT(t)
	objects := releaseFixture()
	shape := shapeOf(objects)

	g.Expect(shape.ids()).To(Equal(idsOf(objects)))
	for _, u := range objects {
		g.Expect(shape.holds(apply.ObjectID(u))).To(BeTrue())
	}
	g.Expect(shape.holds("team-a_creds__Secret")).To(BeTrue())
	g.Expect(shape.holds("team-a_other__Secret")).To(BeFalse(), "a Secret it does not render")
	g.Expect(shape.scopes()).To(Equal(crds.Scopes(objects)))
	g.Expect(shape.scopes()).To(HaveLen(1))
	g.Expect(shape.uses(map[schema.GroupKind]bool{{Group: "example.com", Kind: "Widget"}: true})).To(BeTrue())
	g.Expect(shape.uses(map[schema.GroupKind]bool{{Group: "example.com", Kind: "Gadget"}: true})).To(BeFalse())
	g.Expect(shape.kinds).To(HaveLen(len(objects)), "one of each kind")

	crdShape, webShape := shapeOf(objects[:1]), shapeOf(objects[1:])
	onRender := contracts.Infer(map[string][]*unstructured.Unstructured{"team-a/crd": objects[:1], "team-a/web": objects[1:]}, nil)
	onShape := contracts.Infer(map[string][]*unstructured.Unstructured{"team-a/crd": crdShape.kindObjects(), "team-a/web": webShape.kindObjects()}, nil)
	g.Expect(onShape.Edges()).To(Equal(onRender.Edges()))
	g.Expect(onShape.Edges()).NotTo(BeEmpty(), "the Widget requires the CRD's instance")
	g.Expect(onShape.ProvidedNames("team-a/crd")).To(Equal(onRender.ProvidedNames("team-a/crd")))

	// Nothing of the objects' content stays: of the CRD, only what defines its kind.
	g.Expect(shape.crds).To(HaveLen(1))
	g.Expect(shape.crds[0].Object["spec"]).To(Equal(map[string]any{"group": "example.com", "scope": "Namespaced", "names": map[string]any{"kind": "Widget"}}))
	g.Expect(shape.crds[0].GetLabels()).To(BeNil())
	g.Expect(objects[0].Object["spec"]).To(HaveKey("versions"), "the render itself is left as it was")

	// No render: nothing held, nothing used.
	var none *renderShape
	g.Expect(none.ids()).To(BeEmpty())
	g.Expect(none.holds(apply.ObjectID(objects[1]))).To(BeFalse())
	g.Expect(none.uses(map[schema.GroupKind]bool{{Group: "example.com", Kind: "Widget"}: true})).To(BeFalse())
	g.Expect(none.scopes()).To(BeEmpty())
	g.Expect(none.kindObjects()).To(BeEmpty())
}

// Once its reconcile is done, an instance keeps its result and the ids of what it
// owns, and drops its render's objects.
func TestReleaseRenderKeepsTheResult(t *testing.T) {
	g := NewWithT(t)
	objects := releaseFixture()
	mi := &cairnv1.ModuleInstance{}
	mi.Namespace, mi.Name = "team-a", "web"
	live := mi.DeepCopy()
	status.Succeeded(live, "new", cairnv1.ReasonSucceeded, "ok")
	res := &render.Result{Objects: objects, Digest: "hmac-sha256:abc", ModuleDigest: "sha256:def"}
	r := &instanceState{instancePlan: instancePlan{mi: mi, affected: true, was: live},
		placedRender: placedRender{rendered: res, objects: objects, shape: shapeOf(objects), warnings: []string{"skew"}}}
	x := r.reconcileOn(live)
	x.wrote.report.Changes = ssa.NewChangeSet()
	for i, u := range objects {
		action := ssa.UnchangedAction
		if i < 2 {
			action = ssa.CreatedAction
		}
		x.wrote.report.Changes.Add(ssa.ChangeSetEntry{Subject: apply.Describe(u), Action: action})
	}
	key := []byte("k")
	desired := r.desiredInventory(key)
	before := x.result()

	r.done(x)

	g.Expect(r.objects).To(BeNil())
	g.Expect(r.rendered.Objects).To(BeNil())
	g.Expect(r.rendered.Digest).To(Equal("hmac-sha256:abc"))
	g.Expect(r.rendered.ModuleDigest).To(Equal("sha256:def"))
	after := r.result()
	after.Duration = before.Duration
	g.Expect(after).To(Equal(before))
	g.Expect(after.Message).To(HavePrefix("5 objects applied (2 changed, 3 unchanged)"))
	g.Expect(r.shapeInventory()).To(HaveLen(len(desired)))
	for id := range desired {
		g.Expect(r.shapeInventory()).To(HaveKey(id))
	}
	g.Expect(outcomeOf(r).Result.Message).To(Equal(before.Message), "the outcome its dependents read")
}

// An instance that applied alone (fast) releases its render while the others still
// decide over it: whether it gives up an object another instance takes (a move) and
// what the removed instances' prunes leave out are read from its shape.
func TestAReleasedInstanceStillAnswersTheVerdicts(t *testing.T) {
	g := NewWithT(t)
	objects := releaseFixture()
	mi := &cairnv1.ModuleInstance{}
	mi.Namespace, mi.Name = "team-a", "web"
	placed := make(chan struct{})
	close(placed)
	o := &instanceState{instancePlan: instancePlan{mi: mi, affected: true, was: mi.DeepCopy()}, placed: placed,
		placedRender: placedRender{rendered: &render.Result{Objects: objects}, objects: objects, shape: shapeOf(objects)}}
	s := &RevisionState{byKey: map[string]*instanceState{"team-a/web": o}, runs: []*instanceState{o}}
	deployment, gone := apply.ObjectID(objects[1]), "team-a_old_apps_Deployment"
	before := o.desiredInventory([]byte("k"))

	o.releaseRender()

	for id, want := range map[string]bool{deployment: false, gone: true} {
		releases, err := s.releases(context.Background(), "team-a.web", id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(releases).To(Equal(want), id)
	}
	g.Expect(o.shapeInventory().Minus(before)).To(BeEmpty())
	g.Expect(before.Minus(o.shapeInventory())).To(BeEmpty())
}

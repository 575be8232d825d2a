package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/test/harness"
)

// These tests need what the fake client does not do (see apply_test.go): the API
// server's validation in a server-side dry-run, CRDs whose schema is served once they
// are Established, immutable fields, the Namespace controller, and controllers that
// make a Deployment Available. They run against the control plane of test/harness.

// cluster is a client of the shared control plane and a namespace of t's own.
func cluster(t *testing.T) (client.Client, string) {
	t.Helper()
	hc := harness.ForTest(t)
	c, err := client.New(hc.RESTConfig, client.Options{})
	if err != nil {
		t.Fatalf("failed to create a client: %v", err)
	}
	return c, hc.Namespace(t)
}

// widgetCRD defines Widget of group, namespaced, whose spec.size is an integer.
func widgetCRD(group string) *unstructured.Unstructured {
	return obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets."+group, map[string]any{
		"spec": map[string]any{"group": group, "scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}},
				}}}}},
		},
	})
}

func exists(g *WithT, c client.Client, u *unstructured.Unstructured) bool {
	live, err := GetLive(context.Background(), c, u)
	g.Expect(err).NotTo(HaveOccurred())
	return live != nil && live.GetDeletionTimestamp() == nil
}

// TestObjectsValidatesOnTheAPIServerBeforeWriting: the API server refuses one of two
// changed objects in its dry-run (a ConfigMap key it does not allow); neither is
// written, and the failure names the refused object and stalls.
func TestObjectsValidatesOnTheAPIServerBeforeWriting(t *testing.T) {
	g := NewWithT(t)
	c, ns := cluster(t)
	good := configMap(ns, "good", map[string]any{"k": "v"})
	bad := configMap(ns, "bad", map[string]any{"not a key!": "v"})

	rep, err := Objects(context.Background(), manager(c), []*unstructured.Unstructured{good, bad}, Inventory{}, digestKey, 30*time.Second, nil)

	g.Expect(err).To(MatchError(ContainSubstring("validation before writing failed, nothing of it was written: ConfigMap/" + ns + "/bad dry-run failed")))
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))
	g.Expect(rep.Untouched).To(BeTrue())
	g.Expect(exists(g, c, good)).To(BeFalse(), "the valid object is not written either")
}

// TestObjectsTakesBackANewCRDAndNamespaceWhenTheirObjectsFail: a CRD and a Namespace
// are written to validate a Widget of the CRD and a ConfigMap in the Namespace; the
// Widget's size is not an integer, so both are taken back (deleted) and an existing
// ClusterRole the stage changed gets its rules back. Then, with a valid Widget, all of
// it is applied, definitions first.
func TestObjectsTakesBackANewCRDAndNamespaceWhenTheirObjectsFail(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, ns := cluster(t)
	group := ns + ".apply.cairn.test"
	fresh := namespace(ns + "-fresh")
	reader := obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", ns+"-reader", map[string]any{"rules": []any{
		map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get"}}}})
	g.Expect(c.Create(ctx, reader.DeepCopy())).To(Succeed())
	t.Cleanup(func() {
		for _, u := range []*unstructured.Unstructured{widgetCRD(group), fresh, reader} {
			_ = c.Delete(context.Background(), u)
		}
	})
	changedReader := reader.DeepCopy()
	changedReader.Object["rules"] = []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "delete"}}}
	widget := func(size any) *unstructured.Unstructured {
		return obj(group+"/v1", "Widget", ns, "w", map[string]any{"spec": map[string]any{"size": size}})
	}
	inFresh := configMap(fresh.GetName(), "c", map[string]any{"k": "v"})
	objects := func(size any) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{widget(size), inFresh, widgetCRD(group), fresh, changedReader}
	}

	rep, err := Objects(ctx, manager(c), objects("big"), Inventory{}, digestKey, 30*time.Second, nil)

	g.Expect(err).To(MatchError(ContainSubstring("Widget/" + ns + "/w dry-run failed")))
	g.Expect(err).To(MatchError(ContainSubstring("written first to validate the rest and taken back: ClusterRole/" + ns + "-reader, CustomResourceDefinition/widgets." + group + ", Namespace/" + fresh.GetName())))
	g.Expect(rep.Untouched).To(BeTrue())
	g.Expect(rep.Applied).To(BeEmpty())
	g.Expect(exists(g, c, widgetCRD(group))).To(BeFalse(), "the new CRD is deleted")
	g.Expect(exists(g, c, fresh)).To(BeFalse(), "the new Namespace is deleted")
	live, err := GetLive(ctx, c, reader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.Object["rules"]).To(Equal(reader.Object["rules"]), "the changed ClusterRole is restored")

	// Deleted, not only marked: the controllers finish the deletions.
	for _, u := range []*unstructured.Unstructured{widgetCRD(group), fresh} {
		g.Eventually(func() (*unstructured.Unstructured, error) { return GetLive(ctx, c, u) }).
			WithTimeout(90*time.Second).WithPolling(500*time.Millisecond).Should(BeNil(), Describe(u))
	}

	rep, err = Objects(ctx, manager(c), objects(int64(3)), Inventory{}, digestKey, 30*time.Second, nil)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Applied).To(HaveLen(5))
	g.Expect(exists(g, c, widget(int64(3)))).To(BeTrue())
	live, err = GetLive(ctx, c, reader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.Object["rules"]).To(Equal(changedReader.Object["rules"]))
}

// TestObjectsRecreatesAForcedImmutableChange: the API server refuses to change an
// immutable ConfigMap; cairn says how to let it recreate the object, and does so
// once it is annotated.
func TestObjectsRecreatesAForcedImmutableChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, ns := cluster(t)
	frozen := func(v string) *unstructured.Unstructured {
		return obj("v1", "ConfigMap", ns, "frozen", map[string]any{"immutable": true, "data": map[string]any{"k": v}})
	}
	rep, err := Objects(ctx, manager(c), []*unstructured.Unstructured{frozen("1")}, Inventory{}, digestKey, 30*time.Second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	first, err := GetLive(ctx, c, frozen("1"))
	g.Expect(err).NotTo(HaveOccurred())
	last := InventoryOf([]*unstructured.Unstructured{frozen("1")}, digestKey)

	_, err = Objects(ctx, manager(c), []*unstructured.Unstructured{frozen("2")}, last, digestKey, 30*time.Second, nil)

	g.Expect(err).To(MatchError(ContainSubstring("annotate it with cairn.dev/force: \"true\" to let cairn do so")))
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))

	rep, err = Objects(ctx, manager(c), []*unstructured.Unstructured{forcedCopy(frozen("2"))}, last, digestKey, 30*time.Second, nil)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(actions(rep)).To(Equal(map[string]ssa.Action{"ConfigMap/" + ns + "/frozen": ssa.ConfiguredAction}))
	second, err := GetLive(ctx, c, frozen("2"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.GetUID()).NotTo(Equal(first.GetUID()), "a new object")
	g.Expect(second.Object["data"]).To(Equal(map[string]any{"k": "2"}))
}

// TestWaitHealthyForADeploymentOnARealNode: the response to a Deployment's apply is
// not Current (its controller has not seen it); the wait reads it until the
// controllers and the kwok node have rolled it out.
func TestWaitHealthyForADeploymentOnARealNode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, ns := cluster(t)
	labels := map[string]any{"app": "web"}
	deploy := obj("apps/v1", "Deployment", ns, "web", map[string]any{"spec": map[string]any{
		"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "example.com/web:1"}}}},
	}})

	rep, err := Objects(ctx, manager(c), []*unstructured.Unstructured{deploy}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(NotCurrent(rep.Live)).To(HaveLen(1), "not Current as applied")

	g.Expect(WaitHealthy(ctx, c, nil, rep.Live, 90*time.Second)).To(Succeed())

	live, err := GetLive(ctx, c, deploy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(NotCurrent([]*unstructured.Unstructured{live})).To(BeEmpty())
}

// TestDeleteStaleWaitsForANamespace: prune deletes an instance's Namespace and
// ConfigMap, the ConfigMap first, and waits until the Namespace controller has
// finished; an object of the same name that is not the instance's stays.
func TestDeleteStaleWaitsForANamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, ns := cluster(t)
	gone := labelled(namespace(ns+"-gone"), "")
	cm := labelled(configMap(ns, "stale", nil), "")
	foreign := configMap(ns, "foreign", nil)
	for _, u := range []*unstructured.Unstructured{gone, cm, foreign} {
		g.Expect(c.Create(ctx, u.DeepCopy())).To(Succeed())
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), gone) })

	cs, err := DeleteStale(ctx, manager(c), InventoryOf([]*unstructured.Unstructured{gone, cm, foreign}, nil), instanceKey, "", 90*time.Second)

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cs.Entries).To(HaveLen(3))
	g.Expect(cs.Entries[2].Subject).To(Equal("Namespace/"+gone.GetName()), "the Namespace goes last")
	g.Expect(actions(&Report{Changes: cs})).To(Equal(map[string]ssa.Action{
		"ConfigMap/" + ns + "/stale": ssa.DeletedAction, "ConfigMap/" + ns + "/foreign": ssa.SkippedAction,
		"Namespace/" + gone.GetName(): ssa.DeletedAction,
	}))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: gone.GetName()}, gone.DeepCopy()))).To(BeTrue(),
		"the Namespace is gone, not terminating, when prune returns")
	g.Expect(exists(g, c, cm)).To(BeFalse())
	g.Expect(exists(g, c, foreign)).To(BeTrue())
}

// TestDryRunSaysWhetherTheObjectExists: the API server's answer to a dry-run of an
// apply carries a resourceVersion only for an object that exists, so the ownership
// check can take it for the read it would otherwise send; the dry-run writes nothing.
func TestDryRunSaysWhetherTheObjectExists(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, ns := cluster(t)
	there := configMap(ns, "there", map[string]any{"k": "v"})
	g.Expect(c.Create(ctx, there.DeepCopy())).To(Succeed())
	fresh := configMap(ns, "fresh", map[string]any{"k": "v"})
	changed := configMap(ns, "there", map[string]any{"k": "w"})

	for _, tc := range []struct {
		u      *unstructured.Unstructured
		exists bool
	}{{fresh, false}, {changed, true}, {labelled(namespace(ns+"-dry"), ""), false}} {
		exists, err := DryRun(ctx, c, tc.u)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists).To(Equal(tc.exists), Describe(tc.u))
	}
	g.Expect(exists(g, c, fresh)).To(BeFalse(), "a dry-run creates nothing")
	live, err := GetLive(ctx, c, there)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.Object["data"]).To(Equal(map[string]any{"k": "v"}), "a dry-run changes nothing")

	_, err = DryRun(ctx, c, configMap(ns, "bad", map[string]any{"not a key!": "v"}))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the validation's answer: %v", err)
}

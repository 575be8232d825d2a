package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func toUnstructured(g *WithT, obj client.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

var (
	namespaceGVK   = corev1.SchemeGroupVersion.WithKind("Namespace")
	clusterRoleGVK = rbacv1.SchemeGroupVersion.WithKind("ClusterRole")
)

// firstStageFixture is a cluster where the first stage created the Namespace fresh
// and changed the existing ClusterRole reader (its label and rules), with the state
// read before and the report of the stage.
func firstStageFixture(g *WithT, funcs interceptor.Funcs) (client.Client, priorState, *Report) {
	before := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader", Labels: map[string]string{"team": "a"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}
	after := before.DeepCopy()
	after.Labels["team"] = "b"
	after.Rules[0].Verbs = []string{"get", "delete"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", UID: "ns-uid"}}
	c := fake.NewClientBuilder().WithObjects(ns, after).WithInterceptorFuncs(funcs).Build()

	liveAfter := &rbacv1.ClusterRole{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: "reader"}, liveAfter)).To(Succeed())
	nsU := toUnstructured(g, ns, namespaceGVK)
	crU := toUnstructured(g, liveAfter, clusterRoleGVK)
	beforeU := toUnstructured(g, before, clusterRoleGVK)
	beforeU.SetResourceVersion("1")
	prior := priorState{ObjectID(nsU): nil, ObjectID(crU): beforeU}

	rep := &Report{Changes: ssa.NewChangeSet(), Applied: map[string]bool{}}
	cm := &unstructured.Unstructured{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	cm.SetNamespace("other")
	cm.SetName("kept")
	rep.add(cm, ssa.UnchangedAction) // not of the first stage: stays in the report
	for _, u := range []*unstructured.Unstructured{nsU, crU} {
		rep.Applied[ObjectID(u)] = true
		rep.Live = append(rep.Live, u)
		rep.add(u, ssa.CreatedAction)
	}
	return c, prior, rep
}

var errCRInvalid = outcome.NewStalled(cairnv1.ReasonApplyFailed, errors.New(
	`Widget/fresh/w dry-run failed: spec.size: Invalid value: "string": spec.size in body must be of type integer`))

// TestUndoFirstStageDeletesWhatItCreatedAndRestoresWhatItChanged: after the rest of a
// change fails its validation, the Namespace the first stage created is deleted (by its
// UID) and the ClusterRole it changed gets its labels and rules back; neither stays in
// the report, which says nothing is left written, and the failure keeps the
// validation's message, reason and kind and says what was taken back.
func TestUndoFirstStageDeletesWhatItCreatedAndRestoresWhatItChanged(t *testing.T) {
	g := NewWithT(t)
	var deleteUIDs []string
	c, prior, rep := firstStageFixture(g, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			g.Expect(do.Preconditions).NotTo(BeNil())
			deleteUIDs = append(deleteUIDs, string(*do.Preconditions.UID))
			return c.Delete(ctx, obj, opts...)
		},
	})

	err := undoFirstStage(context.Background(), c, prior, rep, errCRInvalid)

	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))
	g.Expect(f.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	g.Expect(f.Error()).To(ContainSubstring("spec.size: Invalid value"))
	g.Expect(f.Error()).To(ContainSubstring("written first to validate the rest and taken back: ClusterRole/reader, Namespace/fresh"))
	g.Expect(errCRInvalid.Error()).NotTo(ContainSubstring("taken back"), "the cause is not changed")

	g.Expect(deleteUIDs).To(Equal([]string{"ns-uid"}), "only the created Namespace is deleted, by its UID")
	g.Expect(apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Name: "fresh"}, &corev1.Namespace{}))).To(BeTrue())
	cr := &rbacv1.ClusterRole{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: "reader"}, cr)).To(Succeed())
	g.Expect(cr.Labels).To(Equal(map[string]string{"team": "a"}))
	g.Expect(cr.Rules[0].Verbs).To(Equal([]string{"get"}))

	g.Expect(rep.Untouched).To(BeTrue())
	g.Expect(rep.Applied).To(BeEmpty())
	g.Expect(rep.Live).To(BeEmpty())
	g.Expect(rep.Changes.Entries).To(HaveLen(1))
	g.Expect(rep.Changes.Entries[0].Subject).To(Equal("ConfigMap/other/kept"))
}

// TestUndoFirstStageKeepsWhatItCouldNotTakeBack: when the Namespace's deletion fails
// (another object of that name now, say), the failure names it next to the
// validation's message, the Namespace stays in the report as written (so that the
// inventory records it) and the report does not say nothing is left written.
func TestUndoFirstStageKeepsWhatItCouldNotTakeBack(t *testing.T) {
	g := NewWithT(t)
	c, prior, rep := firstStageFixture(g, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, obj.GetName(), errors.New("UID precondition failed"))
		},
	})

	err := undoFirstStage(context.Background(), c, prior, rep, errCRInvalid)

	g.Expect(err).To(MatchError(ContainSubstring("spec.size: Invalid value")))
	g.Expect(err).To(MatchError(ContainSubstring("failed to take back what was written to validate it: Namespace/fresh: failed to delete what this sync created")))
	g.Expect(err.Error()).NotTo(ContainSubstring("ClusterRole/reader:"), "the ClusterRole was restored")
	g.Expect(rep.Untouched).To(BeFalse())
	g.Expect(rep.Applied).To(HaveKey(ContainSubstring("_fresh__Namespace")))
	g.Expect(rep.Applied).To(HaveLen(1))
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: "fresh"}, &corev1.Namespace{})).To(Succeed())
}

// TestReadPriorTellsNewObjectsFromExistingOnes: the state read before the first
// stage is nil for an object that does not exist and the live object for one that does.
func TestReadPriorTellsNewObjectsFromExistingOnes(t *testing.T) {
	g := NewWithT(t)
	existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{"a": "b"}}}
	c := fake.NewClientBuilder().WithObjects(existing).Build()
	oldNS := toUnstructured(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, namespaceGVK)
	newNS := toUnstructured(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, namespaceGVK)

	prior, err := readPrior(context.Background(), c, []*unstructured.Unstructured{oldNS, newNS})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prior).To(HaveLen(2))
	g.Expect(prior).To(HaveKeyWithValue(ObjectID(newNS), BeNil()))
	g.Expect(prior[ObjectID(oldNS)]).NotTo(BeNil())
	g.Expect(prior[ObjectID(oldNS)].GetLabels()).To(Equal(map[string]string{"a": "b"}))
}

// TestApplyFirstStageTakesItBackWhenTheRestFailsItsDryRun: a ConfigMap in a Namespace
// of the first stage is dry-run once the Namespace is written; when the API server
// refuses it, the Namespace, which did not exist, is deleted, and the failure names the
// ConfigMap. When the ConfigMap passes, the Namespace stays.
func TestApplyFirstStageTakesItBackWhenTheRestFailsItsDryRun(t *testing.T) {
	for _, invalid := range []bool{true, false} {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				po := &client.PatchOptions{}
				po.ApplyOptions(opts)
				if invalid && len(po.DryRun) > 0 && obj.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" {
					return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, obj.GetName(), nil)
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		}).Build()
		ns := toUnstructured(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, namespaceGVK)
		cm := toUnstructured(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "fresh", Name: "c"}},
			corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		first, rest := []*unstructured.Unstructured{ns}, []*unstructured.Unstructured{cm}
		early, later := splitByDefinitions(first, rest)
		g.Expect(early).To(BeEmpty())
		rep := &Report{Changes: ssa.NewChangeSet(), Applied: map[string]bool{}}

		err := applyFirstStage(context.Background(), c, first, later, true, Inventory{}, rep, time.Second)

		nsErr := c.Get(context.Background(), client.ObjectKey{Name: "fresh"}, &corev1.Namespace{})
		if invalid {
			g.Expect(err).To(MatchError(ContainSubstring("ConfigMap/fresh/c dry-run failed")))
			g.Expect(err).To(MatchError(ContainSubstring("written first to validate the rest and taken back: Namespace/fresh")))
			g.Expect(apierrors.IsNotFound(nsErr)).To(BeTrue(), "the Namespace this apply created is deleted")
			g.Expect(rep.Untouched).To(BeTrue())
			g.Expect(rep.Applied).To(BeEmpty())
		} else {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nsErr).NotTo(HaveOccurred())
			g.Expect(rep.Applied).To(HaveLen(1))
			g.Expect(rep.Untouched).To(BeFalse())
		}
	}
}

// TestANamespaceBeingDeletedIsTransient: an object refused because its Namespace is
// being deleted (one a failed sync created and took back) is retried, not stalled.
func TestANamespaceBeingDeletedIsTransient(t *testing.T) {
	g := NewWithT(t)
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "c",
		errors.New("unable to create new content in namespace fresh because it is being terminated"))
	g.Expect(outcome.Classify(cairnv1.ReasonApplyFailed, err).Kind).To(Equal(outcome.Stalled), "forbidden, without the cause")
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
	g.Expect(outcome.Classify(cairnv1.ReasonApplyFailed, err).Kind).To(Equal(outcome.Transient))
}

// TestAFieldOfTheWrongTypeStalls: the API server answers an apply whose field has the
// wrong type for the schema with an internal error; it stalls (no retry mends it) and
// names the object and the field, while another internal error stays transient.
func TestAFieldOfTheWrongTypeStalls(t *testing.T) {
	g := NewWithT(t)
	w := &unstructured.Unstructured{}
	w.SetAPIVersion("example.com/v1")
	w.SetKind("Widget")
	w.SetNamespace("ns")
	w.SetName("w")
	mismatch := apierrors.NewInternalError(errors.New(
		"failed to create typed patch object (ns/w; example.com/v1, Kind=Widget): .spec.size: expected numeric (int or float), got string"))
	err := applyFailure(w, "dry-run", mismatch)
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))
	g.Expect(f.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	g.Expect(f.Error()).To(ContainSubstring("Widget/ns/w dry-run failed"))
	g.Expect(f.Error()).To(ContainSubstring(".spec.size: expected numeric (int or float), got string"))

	g.Expect(errors.As(applyFailure(w, "apply", apierrors.NewInternalError(errors.New("etcd timeout"))), &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Transient))
}

// TestDryRunAfterAChangedCRDWaitsForItsSchema: right after a CRD that existed is
// changed, the API server may still judge its objects by the old schema; the dry-run is
// tried again until it passes. After a new CRD, one failure is the answer.
func TestDryRunAfterAChangedCRDWaitsForItsSchema(t *testing.T) {
	for _, existed := range []bool{true, false} {
		g := NewWithT(t)
		calls := 0
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if calls++; calls <= 2 {
					return apierrors.NewInternalError(errors.New("failed to create typed patch object (ns/w): .spec.color: field not declared in schema"))
				}
				return nil
			},
		}).Build()
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("widgets.example.com")
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.com/v1")
		w.SetKind("Widget")
		w.SetNamespace("ns")
		w.SetName("w")
		prior := priorState{ObjectID(crd): nil}
		if existed {
			prior[ObjectID(crd)] = crd.DeepCopy()
		}

		err := dryRunAfterDefinitions(context.Background(), c, []*unstructured.Unstructured{crd}, []*unstructured.Unstructured{w}, prior)

		if existed {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(calls).To(Equal(3))
		} else {
			g.Expect(err).To(MatchError(ContainSubstring(".spec.color: field not declared in schema")))
			g.Expect(calls).To(Equal(1))
		}
	}
}

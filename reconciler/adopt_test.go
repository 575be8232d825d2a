package reconciler

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

func labelled(obj client.Object, instance, uid string) client.Object {
	l := map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}
	if instance != "" {
		l[cairnv1.InstanceLabel] = instance
	}
	if uid != "" {
		l[cairnv1.InstanceUIDLabel] = uid
	}
	obj.SetLabels(l)
	return obj
}

// TestAdoptedInventoryFindsTheInstancesObjectsByLabel: an instance without a CR takes
// as its last inventory the objects labelled as its own, whatever UID they carry,
// among the kinds of its render, of a left-over inventory Secret, and the common
// kinds; nobody else's, nothing unlabelled.
func TestAdoptedInventoryFindsTheInstancesObjectsByLabel(t *testing.T) {
	g := NewWithT(t)
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "ns", Name: name} }
	left, err := apply.EncodeGzipJSON(inv("ns_gone_batch_Job").Entries())
	g.Expect(err).NotTo(HaveOccurred())
	c := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(
		labelled(&corev1.ConfigMap{ObjectMeta: meta("a-x")}, "ns.a", "old-uid"),
		labelled(&appsv1.Deployment{ObjectMeta: meta("a")}, "ns.a", "old-uid"),
		labelled(&corev1.ServiceAccount{ObjectMeta: meta("a")}, "ns.a", ""),
		labelled(&corev1.ConfigMap{ObjectMeta: meta("b-x")}, "ns.b", "b-uid"),
		labelled(&corev1.ConfigMap{ObjectMeta: meta("a-unlabelled")}, "", ""),
		&corev1.ConfigMap{ObjectMeta: meta("a-plain")},
		labelled(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "cairn-inventory-ns.a"},
			Data: map[string][]byte{apply.InventorySecretKey: left}}, "", ""),
	).Build()
	s := &RevisionState{revisionInput: revisionInput{e: &Engine{cluster: &Cluster{client: c}}},
		clusterView: clusterView{managed: map[schema.GroupKind]managedObjects{}}}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	r := &instanceState{instancePlan: instancePlan{mi: mi}, placedRender: placedRender{objects: []*unstructured.Unstructured{cm}}}

	leftover, err := s.leftInventory(context.Background(), mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.adoptionKindsOf(r, leftover)).To(ContainElement(HaveField("Kind", "Job")), "a kind of the left-over inventory")
	found, err := s.adoptedInventory(context.Background(), r)
	g.Expect(err).NotTo(HaveOccurred())
	var ids []string
	for id := range found {
		ids = append(ids, id)
	}
	g.Expect(ids).To(ConsistOf("ns_a-x__ConfigMap", "ns_a_apps_Deployment", "ns_a__ServiceAccount", "ns_gone_batch_Job"),
		"the labelled objects, and what the left-over inventory records")
	g.Expect(r.leftInventory).To(BeTrue())
	g.Expect(found["ns_a_apps_Deployment"].Version).To(Equal("apps/v1"))
	g.Expect(found["ns_a_apps_Deployment"].Hash).To(BeEmpty(), "an adopted object is always applied again")
}

// TestAKeptInventoryIsAdoptedWhereCairnMayNotList: under the controller's RBAC cairn
// may not list objects cluster-wide; the inventory kept when the CR was deleted by
// hand still gives every object, and cairn's own removal keeps nothing.
func TestAKeptInventoryIsAdoptedWhereCairnMayNotList(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	secretLists := 0
	c := fake.NewClientBuilder().WithScheme(Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if list.GetObjectKind().GroupVersionKind().Kind == "SecretList" && lo.Namespace == DefaultNamespace {
				secretLists++ // the names of cairn's Secrets (the left inventories)
			}
			return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("no"))
		},
	}).Build()
	e := &Engine{cluster: &Cluster{client: c}}
	deleted := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	deleted.Status.Inventory = &cairnv1.Inventory{Entries: inv("ns_a-gone__ConfigMap", "ns_a__Service").Entries(), Count: 2}
	g.Expect(e.KeepInventoryOfDeleted(ctx, deleted)).To(Succeed())

	s := &RevisionState{revisionInput: revisionInput{e: e}, clusterView: clusterView{managed: map[schema.GroupKind]managedObjects{}}}
	r := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{ObjectMeta: deleted.ObjectMeta}}}
	found, err := s.adoptedInventory(ctx, r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveKey("ns_a-gone__ConfigMap"), "an object that left the render while the CR was gone")
	g.Expect(found).To(HaveKey("ns_a__Service"))
	_, err = s.adoptedInventory(ctx, &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(secretLists).To(Equal(1), "a refused LIST of cairn's Secrets is not sent again in the sync: each instance reads its own")

	removed := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}}
	removed.Status.Inventory = &cairnv1.Inventory{} // cleared by deleteCR before the delete
	g.Expect(e.KeepInventoryOfDeleted(ctx, removed)).To(Succeed())
	var secrets corev1.SecretList
	g.Expect(c.List(ctx, &secrets)).NotTo(Succeed(), "listing is forbidden here")
	var kept corev1.Secret
	err = c.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: apply.InventorySecretName(removed)}, &kept)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing kept for cairn's own removal")
}

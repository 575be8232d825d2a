package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Removal: an instance whose file leaves Git, as the identity that applied it, with
// prune: false honoured.

func TestRemovalWithPruneFalseOrphansTheObjects(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y"), extra: "  prune: false\n"}
	b := inst{name: "b", ns: e.ns, replicas: 0}
	repo := newGitRepo(t, appRepo("", a, b))
	e.syncClean(repo)
	uid := e.configMap(e.ns, "a-x").UID

	repo.commit("remove a", map[string]string{"instances/a.yaml": ""})
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	ip := planOf(plan, e.ns, "a")
	e.g.Expect(ip.Action).To(BeEquivalentTo("Delete"))
	e.g.Expect(ip.Prune).To(BeEmpty())
	e.g.Expect(ip.Orphan).To(ConsistOf("Deployment/"+e.ns+"/a", "ConfigMap/"+e.ns+"/a-x", "ConfigMap/"+e.ns+"/a-y"))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("Orphan 3 objects"))

	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Deleted"), r.Message)
	e.g.Expect(r.Pruned).To(BeZero())
	e.g.Expect(r.Message).To(ContainSubstring("orphaned 3 objects"))
	e.g.Expect(e.instance(e.ns, "a")).To(BeNil(), "the CR is deleted")
	cm := e.configMap(e.ns, "a-x")
	e.g.Expect(cm).NotTo(BeNil(), "prune: false keeps the objects")
	e.g.Expect(cm.UID).To(Equal(uid))
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", "v-x"))
	e.g.Expect(cm.Labels).NotTo(HaveKey(cairnv1.InstanceLabel), "an orphan is no longer cairn's")
	e.g.Expect(cm.Labels).NotTo(HaveKey(cairnv1.ManagedByLabel))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a")).NotTo(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b")).NotTo(BeNil())
}

// TestRemovalDeletesAsTheDefaultServiceAccount: apply and removal both run as the
// Platform's defaultServiceAccount. Where that account may delete, removal deletes;
// where it may not, removal fails Forbidden and deletes nothing, although cairn
// itself could.
func TestRemovalDeletesAsTheDefaultServiceAccount(t *testing.T) {
	e := newEnv(t)
	readOnly := e.ns + "-nodelete"
	e.grantNamespace(e.ns, "*")
	e.grantNamespace(readOnly, "get", "list", "watch", "create", "update", "patch")
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	b := inst{name: "b", ns: readOnly, replicas: 0, configs: configs("x")}
	c := inst{name: "c", ns: e.ns, replicas: 0}
	repo := newGitRepo(t, appRepo("  defaultServiceAccount: deployer\n", a, b, c))
	e.syncClean(repo)
	e.g.Expect(e.configMap(readOnly, "b-x").ManagedFields).To(ContainElement(
		HaveField("Manager", cairnv1.FieldManager)))

	repo.commit("remove a", map[string]string{"instances/a.yaml": ""})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Deleted"), r.Message)
	e.g.Expect(r.Pruned).To(Equal(2))
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-x")).To(BeTrue())

	repo.commit("remove b", map[string]string{"instances/b.yaml": ""})
	r = result(e.sync(repo), readOnly, "b")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), r.Message)
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneFailed))
	e.g.Expect(r.Retry).To(BeEquivalentTo("Stalled"))
	e.g.Expect(r.Message).To(And(ContainSubstring("forbidden"),
		ContainSubstring(`User "system:serviceaccount:`+readOnly+`:deployer"`), ContainSubstring("Deployment/"+readOnly+"/b delete failed")))
	e.g.Expect(e.configMap(readOnly, "b-x")).NotTo(BeNil(), "nothing is deleted")
	e.g.Expect(e.get("apps/v1", "Deployment", readOnly, "b")).NotTo(BeNil())
	mi := e.instance(readOnly, "b")
	e.g.Expect(mi).NotTo(BeNil(), "the CR stays until its objects are gone")
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
}

// grantNamespace creates namespace ns and lets its ServiceAccount deployer use verbs
// on the core and apps objects there.
func (e *env) grantNamespace(ns string, verbs ...string) {
	e.t.Helper()
	if ns != e.ns {
		e.deleteNamespacesAtEnd(ns)
	}
	e.g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"", "apps"}, Resources: []string{"*"}, Verbs: verbs}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}},
	}
	e.g.Expect(e.c.Create(e.ctx, role)).To(Succeed())
	e.g.Expect(e.c.Create(e.ctx, binding)).To(Succeed())
}

// TestHandDeletedCRLosesNothing: `kubectl delete moduleinstance` takes the inventory
// with it; the next sync re-creates the CR from Git and finds the instance's objects
// by label: the one that left the render meanwhile is pruned, the others are kept
// (same UIDs, no duplicate) and carry the new CR's UID.
func TestHandDeletedCRLosesNothing(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y", "z")}
	b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a, b))
	e.syncClean(repo)
	old := e.instance(e.ns, "a")
	uids := map[string]types.UID{}
	for _, n := range []string{"a-x", "a-y"} {
		uids[n] = e.configMap(e.ns, n).UID
	}
	deployment := e.get("apps/v1", "Deployment", e.ns, "a").GetUID()

	e.g.Expect(e.c.Delete(e.ctx, old)).To(Succeed())
	e.g.Eventually(func() *cairnv1.ModuleInstance { return e.instance(e.ns, "a") }, 10*time.Second).Should(BeNil())
	a.configs = configs("x", "y")
	repo.commit("drop a-z", map[string]string{"instances/a.yaml": a.yaml()})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(r.Pruned).To(Equal(1), r.Message)

	mi := e.instance(e.ns, "a")
	e.g.Expect(mi.UID).NotTo(Equal(old.UID))
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-z")).To(BeTrue(), "the object that left the render is pruned")
	for n, uid := range uids {
		cm := e.configMap(e.ns, n)
		e.g.Expect(cm.UID).To(Equal(uid), "%s is kept, not recreated", n)
		e.g.Expect(cm.Labels).To(HaveKeyWithValue(cairnv1.InstanceUIDLabel, string(mi.UID)))
	}
	d := e.get("apps/v1", "Deployment", e.ns, "a")
	e.g.Expect(d.GetUID()).To(Equal(deployment))
	e.g.Expect(d.GetLabels()).To(HaveKeyWithValue(cairnv1.InstanceUIDLabel, string(mi.UID)))
	var cms corev1.ConfigMapList
	e.g.Expect(e.c.List(e.ctx, &cms, client.InNamespace(e.ns),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "a")})).To(Succeed())
	e.g.Expect(cms.Items).To(HaveLen(2), "no duplicate, no orphan")
	e.g.Expect(mi.Status.Inventory.Count).To(Equal(int32(3)))
	e.g.Expect(e.configMap(e.ns, "b-x")).NotTo(BeNil(), "another instance's objects are not adopted")
}

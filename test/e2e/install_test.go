package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

// readyMessage is the Ready condition's message of instance ns/name ("" when none).
func (e *env) readyMessage(ns, name string) string {
	mi := e.instance(ns, name)
	if mi == nil {
		return ""
	}
	for _, c := range mi.Status.Conditions {
		if c.Type == "Ready" {
			return string(c.Status) + ": " + c.Message
		}
	}
	return ""
}

// TestInstalledControllerRunsWithExactlyItsRBAC: `cairn install --controller`, then
// the Deployment's replica runs with its args and a TokenRequest token of its
// ServiceAccount, nothing more. That is enough: an instance applying as a tenant's
// ServiceAccount becomes Ready, the Lease is taken, metrics are served, the webhook
// secret mounted from its Secret is read. It is not more: the token reads no Secret
// outside cairn's namespace and applies nothing itself, so an instance without a
// ServiceAccount fails, saying how to allow it, while its neighbour is Ready. With
// --allow-apply-as-controller it applies, and an install without the flag takes that
// back; `cairn uninstall` removes the controller and keeps the CRDs, the namespace,
// the Secrets and every object cairn applied.
func TestInstalledControllerRunsWithExactlyItsRBAC(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.grantNamespace(e.ns, "*")
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), extra: "  serviceAccountName: deployer\n"}
	b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a, b))
	hook := filepath.Join(t.TempDir(), "hook")
	e.g.Expect(os.WriteFile(hook, []byte("webhook-s3cret\n"), 0o600)).To(Succeed())
	out := e.installController(bin, repo, "--interval", "1s", "--webhook-secret-file", hook)
	e.g.Expect(out).To(ContainSubstring("Deployment/cairn-system/cairn-controller created"))
	e.g.Expect(out).NotTo(ContainSubstring("webhook-s3cret"))

	kubeconfig, cfg := e.controllerIdentity()
	p := e.newPod("cairn-controller-0", kubeconfig).start(t, bin)
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix("cairn-controller-0_"), p.proc.out.String)
	e.g.Eventually(func() string { return e.readyMessage(e.ns, "a") }, time.Minute, 200*time.Millisecond).
		Should(HavePrefix("True"), p.proc.out.String)
	e.g.Eventually(func() string { return e.readyMessage(e.ns, "b") }, 30*time.Second, 200*time.Millisecond).
		Should(And(HavePrefix("False"), ContainSubstring("no ServiceAccount"), ContainSubstring("--allow-apply-as-controller")),
			p.proc.out.String)
	t.Logf("the instance without a ServiceAccount: %s", e.readyMessage(e.ns, "b"))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b")).To(BeNil(), "nothing of b was applied")
	e.g.Eventually(func() *eventsv1.Event {
		return eventWith(e.eventsAbout(e.ns, e.instance(e.ns, "a").UID), cairnv1.ReasonSucceeded)
	},
		10*time.Second, 200*time.Millisecond).ShouldNot(BeNil(), "its token may write events")
	e.g.Eventually(func() *eventsv1.Event {
		return eventWith(e.eventsAbout(e.ns, e.instance(e.ns, "b").UID), cairnv1.ReasonApplyFailed)
	},
		10*time.Second, 200*time.Millisecond).ShouldNot(BeNil())
	e.g.Eventually(func() string { return httpGet(t, "http://"+p.addrs["metrics"]+"/metrics") }, 10*time.Second, 200*time.Millisecond).
		Should(ContainSubstring(`cairn_instances{state="ready"} 1`))
	resp, err := http.Post("http://"+p.addrs["webhook"]+"/hooks/gitea", "application/json", strings.NewReader("{}"))
	e.g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	e.g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "the receiver runs with the mounted secret")

	e.expectDenied(cfg)

	e.installController(bin, repo, "--interval", "1s", "--webhook-secret-file", hook, "--allow-apply-as-controller")
	b.configs = configs("x", "y")
	repo.commit("b: add y", map[string]string{"instances/b.yaml": b.yaml()})
	e.g.Eventually(func() string { return e.readyMessage(e.ns, "b") }, time.Minute, 200*time.Millisecond).
		Should(HavePrefix("True"), p.proc.out.String)
	e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil())
	out = e.installController(bin, repo, "--interval", "1s", "--webhook-secret-file", hook)
	e.g.Expect(out).To(ContainSubstring("ClusterRoleBinding/"+controller.ApplyAsControllerBinding+" deleted"),
		"an install without the flag takes the choice back")
	b.configs = configs("x", "z")
	repo.commit("b: z for y", map[string]string{"instances/b.yaml": b.yaml()})
	e.g.Eventually(func() string { return e.readyMessage(e.ns, "b") }, time.Minute, 200*time.Millisecond).
		Should(And(HavePrefix("False"), ContainSubstring("--allow-apply-as-controller")), p.proc.out.String)
	e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil(), "a denied sync prunes nothing")

	e.g.Expect(p.proc.cmd.Process.Kill()).To(Succeed())
	<-p.proc.done
	e.expectUninstalled(bin)
}

// expectDenied: the controller's token may read Secrets in cairn's namespace, and no
// Secret elsewhere; it may not write what instances render.
func (e *env) expectDenied(cfg *rest.Config) {
	e.t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: reconciler.Scheme})
	e.g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "tenant-secret"}, StringData: map[string]string{"k": "v"}}
	e.g.Expect(e.c.Create(e.ctx, secret)).To(Succeed())
	e.g.Expect(c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: reconciler.DigestKeySecret}, &corev1.Secret{})).
		To(Succeed(), "its own namespace's Secrets it reads")
	err = c.Get(e.ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant's Secret: %v", err)
	err = c.Get(e.ctx, client.ObjectKey{Namespace: "kube-system", Name: "any"}, &corev1.Secret{})
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "kube-system's Secrets: %v", err)
	err = c.List(e.ctx, &corev1.SecretList{})
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "Secrets of every namespace: %v", err)
	err = c.List(e.ctx, &corev1.ConfigMapList{}, client.InNamespace(e.ns))
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a tenant's ConfigMaps: %v", err)
	err = c.Delete(e.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "a"}})
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting a tenant's Deployment: %v", err)
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: controller.Name, Namespace: reconciler.DefaultNamespace}}}
	err = c.Create(e.ctx, crb)
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding itself to cluster-admin: %v", err)
}

// expectUninstalled: `cairn uninstall` deletes the controller's objects and keeps the
// CRDs, cairn's namespace, its Secrets, the CRs and the objects cairn applied.
func (e *env) expectUninstalled(bin string) {
	e.t.Helper()
	out := e.runCairn(bin, "uninstall", "--kubeconfig", e.cluster.Kubeconfig)
	e.g.Expect(out).To(ContainSubstring("Deployment/cairn-system/cairn-controller deleted"))
	e.g.Expect(out).To(ContainSubstring("ClusterRoleBinding/" + controller.ApplyAsControllerBinding + " not found"))
	gone := []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}, &corev1.Service{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}}
	for _, obj := range gone {
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: controller.Name}, obj)
		e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T: %v", obj, err)
	}
	for _, name := range []string{controller.Name, controller.ApplyAsControllerBinding} {
		err := e.c.Get(e.ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{})
		e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", name, err)
	}
	e.g.Expect(e.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "moduleinstances.cairn.dev")).NotTo(BeNil())
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: controller.WebhookSecret}, &corev1.Secret{})).
		To(Succeed(), "the credential Secrets stay")
	e.g.Expect(e.instance(e.ns, "a")).NotTo(BeNil())
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil(), "nothing cairn applied is deleted")
	e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil())
}

// TestControllersRBACIsRefusedToRenders: with the controller installed, an instance
// that may render ClusterRoles and renders cairn-controller's, widened to everything,
// fails with OwnershipConflict (the controller's objects are cairn's own), and the
// ClusterRole keeps its rules.
func TestControllersRBACIsRefusedToRenders(t *testing.T) {
	e := newEnv(t)
	o := controller.DefaultOptions()
	o.Repo, o.Image = "file:///platform", testImage
	objs, err := controller.Objects(o)
	e.g.Expect(err).NotTo(HaveOccurred())
	us, err := controller.ToUnstructured(objs...)
	e.g.Expect(err).NotTo(HaveOccurred())
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	m, err := cluster.Manager("", "")
	e.g.Expect(err).NotTo(HaveOccurred())
	_, err = m.ApplyAllStaged(e.ctx, us, ssaDefaults())
	e.g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, obj := range controller.Removable(o) {
			_ = e.c.Delete(e.ctx, obj)
		}
	})
	wide := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": controller.Name},
		"rules": []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}}
	spec := permissive + "  clusterResources: [{group: rbac.authorization.k8s.io, kind: ClusterRole}]\n"
	repo := newGitRepo(t, rawRepo(spec, map[string]string{"evil": rawInstance("evil", e.ns, "", wide)}))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "evil", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"ClusterRole/" + controller.Name, "cairn's own and cannot be adopted"}})
	live := &rbacv1.ClusterRole{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: controller.Name}, live)).To(Succeed())
	for _, r := range live.Rules {
		e.g.Expect(r.Verbs).NotTo(ContainElement("*"), "the controller's ClusterRole is unchanged")
	}
}

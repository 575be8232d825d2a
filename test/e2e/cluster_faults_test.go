package e2e

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// Faults of the cluster: what the API server refuses, who else writes the objects, and
// an API server that is not there.

// selectorModule renders a Deployment whose selector key comes from the values, and
// marks it cairn.dev/force when values.force is set.
const selectorModule = `package imm

instance: {name: string, namespace: string}
values: {selector: *"app" | string, force: *false | bool}
objects: deployment: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: {
		name: instance.name
		if values.force {annotations: "cairn.dev/force": "true"}
	}
	spec: {
		replicas: 0
		selector: matchLabels: (values.selector): instance.name
		template: {
			metadata: labels: (values.selector): instance.name
			spec: containers: [{name: "app", image: "ghcr.io/stefanprodan/podinfo:6.7.0"}]
		}
	}
}
`

func selectorOf(u *unstructured.Unstructured) map[string]string {
	m, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	return m
}

func TestImmutableSelectorChangeNeedsForce(t *testing.T) {
	e := newEnv(t)
	files := appRepo("")
	files["modules/imm/main.cue"] = selectorModule
	files["instances/web.yaml"] = localInstanceYAML("web", e.ns, "./modules/imm", `{selector: "app"}`)
	repo := newGitRepo(t, files)
	good := e.syncClean(repo)
	uid := e.get("apps/v1", "Deployment", e.ns, "web").GetUID()

	repo.commit("change the selector", map[string]string{
		"instances/web.yaml": localInstanceYAML("web", e.ns, "./modules/imm", `{selector: "tier"}`)})
	r := result(e.sync(repo), e.ns, "web")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonApplyFailed), r.Message)
	e.g.Expect(r.Message).To(And(ContainSubstring("Deployment/"+e.ns+"/web"), ContainSubstring("field is immutable"),
		ContainSubstring(`annotate it with cairn.dev/force: "true"`)))
	d := e.get("apps/v1", "Deployment", e.ns, "web")
	e.g.Expect(d.GetUID()).To(Equal(uid), "no silent delete and recreate")
	e.g.Expect(selectorOf(d)).To(Equal(map[string]string{"app": "web"}))
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good))
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())

	sha := repo.commit("force the new selector", map[string]string{
		"instances/web.yaml": localInstanceYAML("web", e.ns, "./modules/imm", `{selector: "tier", force: true}`)})
	r = result(e.sync(repo), e.ns, "web")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	d = e.get("apps/v1", "Deployment", e.ns, "web")
	e.g.Expect(d.GetUID()).NotTo(Equal(uid), "recreated")
	e.g.Expect(selectorOf(d)).To(Equal(map[string]string{"tier": "web"}))
	e.g.Expect(e.instance(e.ns, "web").Status.LastAppliedRevision).To(Equal(sha))
}

// denyConfigMapsNamedDenied installs a ValidatingAdmissionPolicy, bound to the test's
// namespace, that denies ConfigMaps whose name ends in -denied, and waits until the
// API server enforces it.
func (e *env) denyConfigMapsNamedDenied() {
	e.t.Helper()
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + e.ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "!object.metadata.name.endsWith('-denied')",
				Message:    "ConfigMaps named *-denied are not allowed here",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-" + e.ns},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		e.g.Expect(e.c.Create(e.ctx, obj)).To(Succeed())
		e.t.Cleanup(func() { _ = e.c.Delete(e.ctx, obj) })
	}
	probe := func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-denied", Namespace: e.ns}}
		return e.c.Create(e.ctx, cm, client.DryRunAll)
	}
	e.g.Eventually(probe, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("-denied are not allowed")))
}

func TestAdmissionDenialNamesTheObjectAndPrunesNothing(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y")}
	b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a, b))
	good := e.syncClean(repo)
	e.denyConfigMapsNamedDenied()

	// a drops y and adds a ConfigMap the policy denies; b changes too.
	a.configs = configs("x", "denied")
	b.configs = configs("x", "z")
	repo.commit("add a denied ConfigMap", map[string]string{"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed,
		contains: []string{"ConfigMap/{ns}/a-denied", "ConfigMaps named *-denied are not allowed here"}})
	e.g.Expect(result(res, e.ns, "a").Message).NotTo(ContainSubstring(cairnv1.ForceAnnotation),
		"a denial is not an immutable-field change: recreating would not help")
	e.expectLastGood("a", good, "x", "y")
	e.g.Expect(e.configMap(e.ns, "a-denied")).To(BeNil())
	e.g.Expect(result(res, e.ns, "a").Pruned).To(Equal(0))
	rb := result(res, e.ns, "b")
	e.g.Expect(rb.Ready).To(BeTrue(), rb.Message)
	e.g.Expect(e.configMap(e.ns, "b-z")).NotTo(BeNil())
}

// grantDeployer lets the ServiceAccount deployer of the test's namespace manage the
// core and apps objects there.
func (e *env) grantDeployer() {
	e.t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: e.ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"", "apps"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: e.ns}},
	}
	e.g.Expect(e.c.Create(e.ctx, role)).To(Succeed())
	e.g.Expect(e.c.Create(e.ctx, binding)).To(Succeed())
}

func TestForbiddenServiceAccountStallsUntilGranted(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), extra: "  serviceAccountName: deployer\n"}
	repo := newGitRepo(t, appRepo("", a))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed,
		contains: []string{"forbidden", `User "system:serviceaccount:{ns}:deployer"`}})
	mi := e.instance(e.ns, "a")
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	e.g.Expect(mi.Status.LastAppliedRevision).To(BeEmpty())
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a")).To(BeNil())
	e.g.Expect(e.configMap(e.ns, "a-x")).To(BeNil())

	e.grantDeployer()
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Message).To(ContainSubstring("not retried before"),
		"a stalled instance is not retried at the same revision before its 30 minutes")
	repo.commit("retry after the grant", map[string]string{"README.md": "granted\n"})
	res = e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil())
	e.g.Expect(e.instance(e.ns, "a").Status.LastAppliedRevision).To(Equal(res.Revision))
}

// ownsValue reports whether manager owns data.value of the ConfigMap.
func ownsValue(cm *corev1.ConfigMap, manager string) bool {
	for _, f := range cm.ManagedFields {
		if f.Manager == manager && f.FieldsV1 != nil && strings.Contains(string(f.FieldsV1.Raw), `"f:value"`) {
			return true
		}
	}
	return false
}

func TestFieldManagerConflictIsForcedByCairn(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	e.syncClean(repo)

	// Another controller takes data.value over with its own server-side apply.
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(e.ns)
	u.SetName("a-x")
	e.g.Expect(unstructured.SetNestedField(u.Object, "theirs", "data", "value")).To(Succeed())
	e.g.Expect(e.c.Apply(e.ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("other-controller"), client.ForceOwnership)).To(Succeed())
	e.g.Expect(ownsValue(e.configMap(e.ns, "a-x"), cairnv1.FieldManager)).To(BeFalse())

	// Git changes that field: cairn's apply takes it back (ForceOwnership), no conflict error.
	a.configs = map[string]string{"x": "from-git"}
	repo.commit("change a-x", map[string]string{"instances/a.yaml": a.yaml()})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	cm := e.configMap(e.ns, "a-x")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", "from-git"))
	e.g.Expect(ownsValue(cm, cairnv1.FieldManager)).To(BeTrue())
	e.g.Expect(ownsValue(cm, "other-controller")).To(BeFalse())
}

// refusedAddr returns a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestUnreachableAPIServerIsTransient(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns, replicas: 0}))
	src, err := gitsource.New(gitsource.Options{URL: repo.url(), CacheDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	head, err := src.Head(e.ctx)
	g.Expect(err).NotTo(HaveOccurred())
	rev, err := reconciler.ReadRevision(e.ctx, src, head, "")
	g.Expect(err).NotTo(HaveOccurred())

	cfg := rest.CopyConfig(e.cluster.RESTConfig)
	cfg.Host = "https://" + refusedAddr(t)
	cluster, err := reconciler.NewCluster(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	engine := reconciler.New(cluster, render.NewRenderer(), reconciler.DefaultOptions())

	start := time.Now()
	_, err = engine.LastSynced(e.ctx)
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	res, err := engine.Sync(e.ctx, rev)
	g.Expect(res).To(BeNil())
	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue(), "%v", err)
	g.Expect(f.Kind).To(Equal(outcome.Transient))
	g.Expect(f.Error()).To(ContainSubstring("connection refused"))
	_, err = engine.Plan(e.ctx, rev)
	g.Expect(err).To(MatchError(ContainSubstring("connection refused")))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
}

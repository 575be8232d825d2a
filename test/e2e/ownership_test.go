package e2e

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// permissive is a Platform spec that lets instances put objects in every namespace but
// kube-*: the policy under which one instance could reach another's objects.
const permissive = "  namespaces:\n    allow: [\"*\"]\n    deny: [\"kube-*\"]\n"

// TestTakeoverOfAnotherInstancesObjectIsRefused: an attacker's instance renders the
// Deployment of another instance (same name, the victim's namespace, its own image).
// It fails with OwnershipConflict naming the owner; the victim's Deployment keeps its
// image and labels, and survives the attacker leaving Git.
func TestTakeoverOfAnotherInstancesObjectIsRefused(t *testing.T) {
	e := newEnv(t)
	victimNS, attackerNS := e.ns+"-v", e.ns+"-a"
	e.deleteNamespacesAtEnd(victimNS, attackerNS)
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"victim": rawInstance("victim", victimNS, "", deploymentObj(victimNS, "web", "podinfo:6.7.0")),
	}))
	e.syncClean(repo)
	before := e.get("apps/v1", "Deployment", victimNS, "web")

	repo.commit("take over", map[string]string{"instances/attacker.yaml": rawInstance("attacker", attackerNS, "",
		deploymentObj(victimNS, "web", "evil:1"), configMapObj("", "decoy", "x"))})
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{ns: attackerNS, name: "attacker", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"Deployment/" + victimNS + "/web is owned by instance " + victimNS + "/victim"}})
	after := e.get("apps/v1", "Deployment", victimNS, "web")
	e.g.Expect(imageOf(after)).To(Equal("podinfo:6.7.0"))
	e.g.Expect(ownerOf(after)).To(Equal(victimNS + ".victim"))
	e.g.Expect(after.GetResourceVersion()).To(Equal(before.GetResourceVersion()), "not written at all")
	e.g.Expect(e.configMap(attackerNS, "decoy")).To(BeNil(), "a conflicting instance writes nothing")
	e.g.Expect(isTrue(e.instance(victimNS, "victim"), "Ready")).To(BeTrue())

	repo.commit("leave", map[string]string{"instances/attacker.yaml": ""})
	e.syncClean(repo)
	e.g.Expect(e.gone("apps/v1", "Deployment", victimNS, "web")).To(BeFalse(), "the attacker's removal deletes nothing of the victim's")
	e.g.Expect(imageOf(e.get("apps/v1", "Deployment", victimNS, "web"))).To(Equal("podinfo:6.7.0"))
}

// TestObjectsGoOnlyToTheInstancesNamespaceByDefault: without a namespaces.allow grant,
// an instance that renders into another namespace is refused and writes nothing there.
func TestObjectsGoOnlyToTheInstancesNamespaceByDefault(t *testing.T) {
	e := newEnv(t)
	other := e.ns + "-b"
	e.deleteNamespacesAtEnd(other)
	e.ensureNamespace(other)
	e.createConfigMap(other, "settings", nil)
	repo := newGitRepo(t, rawRepo("  namespaces:\n    deny: [\"kube-*\"]\n", map[string]string{
		"a": rawInstance("a", e.ns, "", configMapObj("", "mine", "x"), configMapObj(other, "settings", "mine")),
	}))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonNamespaceDenied,
		contains: []string{"ConfigMap/" + other + "/settings", "is not the instance's own ({ns})"}})
	e.g.Expect(e.configMap(other, "settings").Data).To(HaveKeyWithValue("value", "not cairn's"))
	e.g.Expect(e.configMap(e.ns, "mine")).To(BeNil())
}

// TestSharedObjectInOneRevision: two instances that render the same new object in
// one revision: the first to claim it once rendered keeps it and the other fails
// naming it, writing nothing (each applies as soon as its own render is done, so
// neither waits for the other's: docs/architecture.md, the render barrier); once
// two gives it up one owns it; a third that renders it later fails and the owner
// keeps it (no flip-flop).
func TestSharedObjectInOneRevision(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"one": rawInstance("one", e.ns, "", configMapObj("", "shared", "one")),
		"two": rawInstance("two", e.ns, "", configMapObj("", "shared", "two"), configMapObj("", "two-own", "x")),
	}))
	res := e.sync(repo)
	winner, loser := "one", "two"
	if result(res, e.ns, "one").Action == "Failed" {
		winner, loser = "two", "one"
	}
	e.expectFailure(res, wantFailure{name: loser, reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"ConfigMap/{ns}/shared is rendered by this instance and by {ns}/" + winner + " in the same revision"}})
	e.g.Expect(result(res, e.ns, winner).Action).NotTo(BeEquivalentTo("Failed"), "%+v", result(res, e.ns, winner))
	cm := e.configMap(e.ns, "shared")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", winner))
	e.g.Expect(cm.Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+"."+winner))
	if loser == "two" {
		e.g.Expect(e.configMap(e.ns, "two-own")).To(BeNil(), "the instance that lost wrote nothing")
	}

	repo.commit("two gives it up", map[string]string{"instances/two.yaml": rawInstance("two", e.ns, "", configMapObj("", "two-own", "x"))})
	e.syncClean(repo)
	e.g.Expect(e.configMap(e.ns, "shared").Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+".one"))

	repo.commit("two wants it back", map[string]string{"instances/two.yaml": rawInstance("two", e.ns, "",
		configMapObj("", "shared", "two"), configMapObj("", "two-own", "y"))})
	res = e.sync(repo)
	e.expectFailure(res, wantFailure{name: "two", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"ConfigMap/{ns}/shared is owned by instance {ns}/one"}})
	cm = e.configMap(e.ns, "shared")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", "one"))
	e.g.Expect(cm.Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+".one"))
	e.g.Expect(e.configMap(e.ns, "two-own").Data).To(HaveKeyWithValue("value", "x"), "the failed instance wrote nothing")
}

// TestMoveBetweenInstancesInOneRevision: the one transfer: one commit takes an object
// out of one instance and into another; it is neither deleted nor refused.
func TestMoveBetweenInstancesInOneRevision(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"one": rawInstance("one", e.ns, "", configMapObj("", "moving", "one"), configMapObj("", "one-own", "x")),
		"two": rawInstance("two", e.ns, "", configMapObj("", "two-own", "x")),
	}))
	e.syncClean(repo)
	uid := e.configMap(e.ns, "moving").UID
	repo.commit("move", map[string]string{
		"instances/one.yaml": rawInstance("one", e.ns, "", configMapObj("", "one-own", "x")),
		"instances/two.yaml": rawInstance("two", e.ns, "", configMapObj("", "moving", "two"), configMapObj("", "two-own", "x")),
	})
	e.syncClean(repo)
	cm := e.configMap(e.ns, "moving")
	e.g.Expect(cm.UID).To(Equal(uid), "transferred, not re-created")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", "two"))
	e.g.Expect(cm.Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+".two"))
}

// TestNamespaceGrabIsRefused: an attacker renders another instance's Namespace with its
// own labels and pruneProtected, then leaves Git: the Namespace keeps its labels and,
// with everything in it, survives.
func TestNamespaceGrabIsRefused(t *testing.T) {
	e := newEnv(t)
	data, attackerNS := e.ns+"-data", e.ns+"-a"
	e.deleteNamespacesAtEnd(data, attackerNS)
	nsObj := func(owner string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": data, "labels": map[string]any{"team": owner}}}
	}
	spec := permissive + "  clusterResources: [{group: \"\", kind: Namespace}]\n  limits:\n    allowPruneProtected: true\n"
	repo := newGitRepo(t, rawRepo(spec, map[string]string{
		"victim": rawInstance("victim", e.ns, "", nsObj("victim"), configMapObj(data, "precious", "x")),
	}))
	e.syncClean(repo)

	repo.commit("grab", map[string]string{"instances/attacker.yaml": rawInstance("attacker", attackerNS, "  pruneProtected: true\n", nsObj("attacker"))})
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{ns: attackerNS, name: "attacker", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"Namespace/" + data + " is owned by instance {ns}/victim"}})
	repo.commit("leave", map[string]string{"instances/attacker.yaml": ""})
	e.syncClean(repo)
	ns := e.get("v1", "Namespace", "", data)
	e.g.Expect(ns.GetDeletionTimestamp()).To(BeNil())
	e.g.Expect(ns.GetLabels()).To(HaveKeyWithValue("team", "victim"))
	e.g.Expect(e.configMap(data, "precious")).NotTo(BeNil())
}

// TestClusterScopedEscalationIsRefused: binding the namespace's default ServiceAccount
// to cluster-admin is refused as cairn (no ServiceAccount, kind not granted) and, as a
// ServiceAccount, by its RBAC; either way no ClusterRoleBinding exists afterwards.
func TestClusterScopedEscalationIsRefused(t *testing.T) {
	e := newEnv(t)
	crb := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": e.ns + "-root"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": e.ns}}}
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{"a": rawInstance("a", e.ns, "", crb)}))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonObjectForbidden,
		contains: []string{"ClusterRoleBinding/{ns}-root: cluster-scoped kind ClusterRoleBinding.rbac.authorization.k8s.io needs spec.serviceAccountName"}})
	e.g.Expect(e.get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", e.ns+"-root")).To(BeNil())

	e.grantDeployer()
	repo.commit("as a ServiceAccount", map[string]string{"instances/a.yaml": rawInstance("a", e.ns, "  serviceAccountName: deployer\n", crb)})
	res = e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed,
		contains: []string{"forbidden", `User "system:serviceaccount:{ns}:deployer"`}})
	e.g.Expect(e.get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", e.ns+"-root")).To(BeNil())
}

// TestSmuggledCairnObjectsAreRefused: a render holding cairn's own kinds (a
// ModuleInstance, a Platform) is refused whatever the policy; the Platform is unchanged,
// no smuggled CR exists, and another instance of the same commit syncs.
func TestSmuggledCairnObjectsAreRefused(t *testing.T) {
	e := newEnv(t)
	smuggled := map[string]any{"apiVersion": "cairn.dev/v1alpha1", "kind": "ModuleInstance",
		"metadata": map[string]any{"name": "smuggled"}, "spec": map[string]any{"module": map[string]any{"local": map[string]any{"path": "./x"}}}}
	platform := map[string]any{"apiVersion": "cairn.dev/v1alpha1", "kind": "Platform",
		"metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{"verify": map[string]any{"mode": "Off"}}}
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"a":      rawInstance("a", e.ns, "", smuggled),
		"b":      rawInstance("b", e.ns, "", platform),
		"honest": rawInstance("honest", e.ns, "", configMapObj("", "honest", "x")),
	}))
	res := e.sync(repo)
	for _, name := range []string{"a", "b"} {
		e.expectFailure(res, wantFailure{name: name, reason: cairnv1.ReasonObjectForbidden, contains: []string{"cairn's own API group cairn.dev"}})
	}
	e.g.Expect(result(res, e.ns, "honest").Ready).To(BeTrue())
	e.g.Expect(e.instance(e.ns, "smuggled")).To(BeNil())
	var p cairnv1.Platform
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p)).To(Succeed())
	e.g.Expect(p.Spec.Verify.Mode).To(BeEmpty())
}

// TestCairnNamespaceIsRefusedUnderAPermissivePolicy: under a Platform that allows every
// namespace, an instance that renders (or generates) the trusted cosign key Secret in
// cairn's namespace is refused, and the key stays as it was.
func TestCairnNamespaceIsRefusedUnderAPermissivePolicy(t *testing.T) {
	e := newEnv(t)
	const cairnNS = "cairn-system"
	e.ensureNamespace(cairnNS)
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cairnNS, Name: e.ns + "-cosign-pub"},
		StringData: map[string]string{"cosign.pub": "trusted"}}
	e.g.Expect(e.c.Create(e.ctx, key)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(e.ctx, key) })
	evil := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": e.ns + "-cosign-pub", "namespace": cairnNS},
		"stringData": map[string]any{"cosign.pub": "evil"}}
	generated := "  secrets:\n    - name: " + e.ns + "-cosign-pub\n      toNamespaces: [" + cairnNS + "]\n" +
		"      data:\n        cosign.pub: {random: {length: 16}}\n"
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"rendered":  rawInstance("rendered", e.ns, "", evil),
		"generated": rawInstance("generated", e.ns, generated, configMapObj("", "x", "x")),
	}))
	res := e.sync(repo)
	for _, name := range []string{"rendered", "generated"} {
		e.expectFailure(res, wantFailure{name: name, reason: cairnv1.ReasonNamespaceDenied,
			contains: []string{`namespace "cairn-system" is cairn's own namespace`}})
	}
	var got corev1.Secret
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(key), &got)).To(Succeed())
	e.g.Expect(string(got.Data["cosign.pub"])).To(Equal("trusted"))
	e.g.Expect(got.Labels).NotTo(HaveKey(cairnv1.InstanceLabel))
}

// TestAdoptIsAnExplicitOptIn: an object that exists and that no instance owns (made by
// hand) fails the instance that renders it and stays as it is; with spec.adopt the plan
// says it is adopted and the sync takes it over.
func TestAdoptIsAnExplicitOptIn(t *testing.T) {
	e := newEnv(t)
	e.ensureNamespace(e.ns)
	e.createConfigMap(e.ns, "legacy", nil)
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{"a": rawInstance("a", e.ns, "", configMapObj("", "legacy", "from-git"))}))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"ConfigMap/{ns}/legacy already exists and no cairn instance owns it: set spec.adopt: true"}})
	e.g.Expect(e.configMap(e.ns, "legacy").Data).To(HaveKeyWithValue("value", "not cairn's"))

	repo.commit("adopt", map[string]string{"instances/a.yaml": rawInstance("a", e.ns, "  adopt: true\n", configMapObj("", "legacy", "from-git"))})
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	var adopt []string
	for _, ip := range plan.Instances {
		if ip.Namespace == e.ns && ip.Name == "a" {
			e.g.Expect(ip.Error).To(BeEmpty())
			adopt = ip.Adopt
		}
	}
	e.g.Expect(adopt).To(Equal([]string{"ConfigMap/" + e.ns + "/legacy"}))
	res = e.sync(repo)
	got := result(res, e.ns, "a")
	e.g.Expect(got.Ready).To(BeTrue(), got.Message)
	e.g.Expect(got.Warnings).To(ContainElement(ContainSubstring("adopted 1 existing object(s): ConfigMap/" + e.ns + "/legacy")))
	cm := e.configMap(e.ns, "legacy")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("value", "from-git"))
	e.g.Expect(cm.Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+".a"))
}

// TestDriftLeavesObjectsThatAreNoLongerTheInstancesAlone: an object relabelled (by
// hand) to another instance is reported, not corrected, by the drift check.
func TestDriftLeavesObjectsThatAreNoLongerTheInstancesAlone(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{"a": rawInstance("a", e.ns, "",
		configMapObj("", "kept", "git"), configMapObj("", "given-away", "git"))}))
	e.syncClean(repo)
	cm := e.configMap(e.ns, "given-away")
	cm.Labels[cairnv1.InstanceLabel] = e.ns + ".other"
	cm.Data["value"] = "changed"
	e.g.Expect(e.c.Update(e.ctx, cm)).To(Succeed())
	kept := e.configMap(e.ns, "kept")
	kept.Data["value"] = "changed"
	e.g.Expect(e.c.Update(e.ctx, kept)).To(Succeed())

	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(reports).To(HaveLen(1))
	e.g.Expect(reports[0].Err).NotTo(HaveOccurred())
	e.g.Expect(reports[0].Foreign).To(Equal([]string{"ConfigMap/" + e.ns + "/given-away"}))
	e.g.Expect(reports[0].Drifted).To(Equal([]string{"ConfigMap/" + e.ns + "/kept"}))
	e.g.Expect(e.configMap(e.ns, "kept").Data).To(HaveKeyWithValue("value", "git"))
	e.g.Expect(e.configMap(e.ns, "given-away").Data).To(HaveKeyWithValue("value", "changed"))
}

// TestIdentityChangeReappliesEveryObject: changing serviceAccountName re-applies every
// object (the API server checks the new identity's RBAC), so a ServiceAccount that may
// not write them fails the instance, and the status records the identity applied as.
func TestIdentityChangeReappliesEveryObject(t *testing.T) {
	e := newEnv(t)
	objs := []map[string]any{configMapObj("", "one", "x"), configMapObj("", "two", "x")}
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{"a": rawInstance("a", e.ns, "", objs...)}))
	e.syncClean(repo)
	e.g.Expect(e.instance(e.ns, "a").Status.ServiceAccount).To(BeEmpty())

	e.grantDeployer()
	repo.commit("as deployer", map[string]string{"instances/a.yaml": rawInstance("a", e.ns, "  serviceAccountName: deployer\n", objs...)})
	res := e.sync(repo)
	got := result(res, e.ns, "a")
	e.g.Expect(got.Ready).To(BeTrue(), got.Message)
	e.g.Expect(got.Applied).To(Equal(2), "every object is applied again as the new identity")
	e.g.Expect(e.instance(e.ns, "a").Status.ServiceAccount).To(Equal("deployer"))

	viewer(e)
	repo.commit("as viewer", map[string]string{"instances/a.yaml": rawInstance("a", e.ns, "  serviceAccountName: viewer\n", objs...)})
	res = e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed,
		contains: []string{"forbidden", `User "system:serviceaccount:{ns}:viewer"`}})
	e.g.Expect(e.instance(e.ns, "a").Status.ServiceAccount).To(Equal("deployer"), "the last good identity stays")
}

// TestRefusedInstanceCanBeRemoved: an instance whose ServiceAccount may not even read
// the kind it renders never applies it: the read before the first write, made as that
// ServiceAccount, is denied, so nothing is recorded or written; removing its file
// removes the instance.
func TestRefusedInstanceCanBeRemoved(t *testing.T) {
	e := newEnv(t)
	viewer(e)
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "token"}, "stringData": map[string]any{"k": "v"}}
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"a":    rawInstance("a", e.ns, "  serviceAccountName: viewer\n", secret),
		"stay": rawInstance("stay", e.ns, "", configMapObj("", "stay", "x")),
		"also": rawInstance("also", e.ns, "", configMapObj("", "also", "x")),
	}))
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed, contains: []string{"forbidden"}})
	e.g.Expect(e.instance(e.ns, "a").Status.Inventory).To(BeNil(), "denied at the read, before anything is recorded")
	e.g.Expect(e.get("v1", "Secret", e.ns, "token")).To(BeNil())

	repo.commit("remove", map[string]string{"instances/a.yaml": ""})
	res = e.sync(repo)
	got := result(res, e.ns, "a")
	e.g.Expect(got.Action).To(BeEquivalentTo("Deleted"), got.Message)
	e.g.Expect(e.instance(e.ns, "a")).To(BeNil())
}

// viewer creates the ServiceAccount viewer of the test's namespace bound to the
// built-in view ClusterRole there (read most things, write nothing, no Secrets).
func viewer(e *env) {
	e.t.Helper()
	e.ensureNamespace(e.ns)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: e.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: e.ns}},
	}
	e.g.Expect(e.c.Create(e.ctx, binding)).To(Succeed())
}

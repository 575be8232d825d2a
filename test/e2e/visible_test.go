package e2e

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// TestCatalogSkewWarnsOrRefuses: a registry module that needs a newer catalog than the
// Platform pins renders with the pinned one under skewPolicy: Warn, and the warning is
// in the plan, the sync result and the CR's Ready message; under Refuse the instance
// fails with CatalogSkew and keeps its last good state.
func TestCatalogSkewWarnsOrRefuses(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, false)
	mr := render.ModuleRegistry{Host: reg.Host, PlainHTTP: true}
	for _, m := range []struct{ dir, version string }{
		{"../../examples/registry/catalog", "v0.0.1"},
		{"../../examples/registry/catalog", "v0.1.0"},
		{"../../examples/registry/redis", "v0.1.0"}, // requires the catalog at v0.1.0
	} {
		_, err := render.PushModule(e.ctx, m.dir, mr, m.version)
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	platform := func(policy string) string {
		return platformWithVerify("Off", "  skewPolicy: "+policy+"\n  moduleRegistry: modules\n"+
			"  catalogs:\n    - {module: cairn.dev/examples/catalog@v0, version: v0.0.1}\n")
	}
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":   platform("Warn"),
		"registries.yaml": registryYAML("modules", reg.Host, true, ""),
		"instances/cache.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: cache\n  namespace: " + e.ns +
			"\nspec:\n  module:\n    cue: {path: cairn.dev/examples/redis@v0, version: v0.1.0}\n  timeout: 1m\n",
	})
	const skew = "requires catalog cairn.dev/examples/catalog@v0 v0.1.0, newer than the pinned v0.0.1; rendering with v0.0.1"

	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(plan.Failed()).To(BeFalse(), "%+v", plan)
	e.g.Expect(planOf(plan, e.ns, "cache").Warnings).To(ConsistOf(ContainSubstring(skew)))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("**Warning:** module cairn.dev/examples/redis@v0.1.0 " + skew))

	res := e.sync(repo)
	got := result(res, e.ns, "cache")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(got.Warnings).To(ConsistOf(ContainSubstring(skew)))
	mi := e.instance(e.ns, "cache")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())
	e.g.Expect(conditions.GetMessage(mi, "Ready")).To(ContainSubstring("warnings: module cairn.dev/examples/redis@v0.1.0 " + skew))
	good := mi.Status.LastAppliedRevision

	repo.commit("refuse skew", map[string]string{"platform.yaml": platform("Refuse")})
	res = e.sync(repo)
	got = result(res, e.ns, "cache")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(got.Reason).To(Equal(render.ReasonCatalogSkew))
	mi = e.instance(e.ns, "cache")
	e.g.Expect(conditions.IsFalse(mi, "Ready")).To(BeTrue())
	e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(render.ReasonCatalogSkew))
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good), "the last good state stays")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "cache")).NotTo(BeNil())
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
}

// planOf returns the plan of one instance.
func planOf(p *reconciler.Plan, ns, name string) reconciler.InstancePlan {
	for _, i := range p.Instances {
		if i.Namespace == ns && i.Name == name {
			return i
		}
	}
	return reconciler.InstancePlan{Action: "Missing"}
}

// TestSuspendedInstanceSaysSoAndIsLeftAlone: suspend: true reaches the CR, which says
// Ready=Unknown/Suspended; its objects are neither applied, pruned nor drift-corrected,
// a dependent still syncs; resuming re-syncs.
func TestSuspendedInstanceSaysSoAndIsLeftAlone(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x")}
	b := inst{name: "b", ns: e.ns, replicas: 1, dependsOn: []string{"a"}}
	repo := newGitRepo(t, appRepo("", a, b))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	good := e.instance(e.ns, "a").Status.LastAppliedRevision

	a.configs, a.extra = configs("y"), "  suspend: true\n"
	b.replicas = 2
	repo.commit("suspend a and change it", map[string]string{"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Skipped"), "%+v", res)
	e.g.Expect(result(res, e.ns, "b").Ready).To(BeTrue(), "a suspended dependency with its objects in place does not block: %+v", res)
	mi := e.instance(e.ns, "a")
	e.g.Expect(mi.Spec.Suspend).To(BeTrue(), "the spec is mirrored")
	e.g.Expect(conditions.IsUnknown(mi, "Ready")).To(BeTrue())
	e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(cairnv1.ReasonSuspended))
	e.g.Expect(mi.Status.ObservedGeneration).To(Equal(mi.Generation))
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good))
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil(), "not pruned")
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "not applied")

	e.scale("a", 3)
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, r := range reports {
		e.g.Expect(r.Namespace+"/"+r.Name).NotTo(Equal(e.ns+"/a"), "a suspended instance is not drift-checked")
	}
	e.g.Expect(e.replicas("a")).To(Equal(int32(3)))
	e.g.Expect(result(e.sync(repo), e.ns, "a").Action).To(BeEquivalentTo("Skipped"))

	a.extra = ""
	sha := repo.commit("resume a", map[string]string{"instances/a.yaml": a.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	mi = e.instance(e.ns, "a")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(sha))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil())
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-x")).To(BeTrue())
}

// claimModule renders a PersistentVolumeClaim that no provisioner ever binds.
const claimModule = `package claim

instance: {name: string, namespace: string}
objects: claim: {
	apiVersion: "v1"
	kind:       "PersistentVolumeClaim"
	metadata: name: instance.name
	spec: {
		accessModes: ["ReadWriteOnce"]
		storageClassName: "none"
		resources: requests: storage: "1Gi"
	}
}
`

// TestHealthyConditionFollowsTheHealthWait: Healthy=True once every applied object
// is Current; False with HealthCheckFailed naming the object that never is.
func TestHealthyConditionFollowsTheHealthWait(t *testing.T) {
	e := newEnv(t)
	files := appRepo("", inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x")})
	files["modules/claim/claim.cue"] = claimModule
	files["instances/claim.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: claim\n  namespace: " + e.ns +
		"\nspec:\n  module:\n    local:\n      path: ./modules/claim\n  timeout: 3s\n"
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	a := e.instance(e.ns, "a")
	e.g.Expect(conditions.IsTrue(a, cairnv1.HealthyCondition)).To(BeTrue())
	e.g.Expect(conditions.GetMessage(a, cairnv1.HealthyCondition)).To(Equal("2 applied object(s) are Current"))

	e.g.Expect(result(res, e.ns, "claim").Reason).To(Equal(cairnv1.ReasonHealthCheckFailed), "%+v", res)
	claim := e.instance(e.ns, "claim")
	e.g.Expect(conditions.IsFalse(claim, cairnv1.HealthyCondition)).To(BeTrue())
	e.g.Expect(conditions.GetReason(claim, cairnv1.HealthyCondition)).To(Equal(cairnv1.ReasonHealthCheckFailed))
	e.g.Expect(conditions.GetMessage(claim, cairnv1.HealthyCondition)).To(ContainSubstring("PersistentVolumeClaim/" + e.ns + "/claim"))
}

// TestPruneSkipsAnObjectLabelledWithAnotherInstanceUID: an object in the inventory
// that now carries the instance's name label but another instance UID (a same-named
// instance created elsewhere, or a forged label) is not deleted by prune.
func TestPruneSkipsAnObjectLabelledWithAnotherInstanceUID(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x", "y")}
	repo := newGitRepo(t, appRepo("", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	uid := string(e.instance(e.ns, "a").UID)
	e.g.Expect(e.configMap(e.ns, "a-y").Labels).To(HaveKeyWithValue(cairnv1.InstanceUIDLabel, uid))

	e.g.Expect(e.c.Delete(e.ctx, e.configMap(e.ns, "a-y"))).To(Succeed())
	e.createConfigMap(e.ns, "a-y", map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue,
		cairnv1.InstanceLabel: e.ns + ".a", cairnv1.InstanceUIDLabel: "another-instance-uid"})
	a.configs = configs("x")
	repo.commit("drop y", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "a").Pruned).To(Equal(0))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "another instance's object is not deleted")
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil())
}

// TestRemovalSkipsAnObjectLabelledWithAnotherInstanceUID: removing an instance
// deletes only the objects whose instance-uid label is its own; one carrying the
// same instance key but another UID stays.
func TestRemovalSkipsAnObjectLabelledWithAnotherInstanceUID(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y")}
	b := inst{name: "b", ns: e.ns, replicas: 0}
	repo := newGitRepo(t, appRepo("", a, b))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())

	e.g.Expect(e.c.Delete(e.ctx, e.configMap(e.ns, "a-y"))).To(Succeed())
	e.createConfigMap(e.ns, "a-y", map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue,
		cairnv1.InstanceLabel: e.ns + ".a", cairnv1.InstanceUIDLabel: "another-instance-uid"})
	repo.commit("remove a", map[string]string{"instances/a.yaml": ""})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Deleted"), r.Message)
	e.g.Expect(e.configMap(e.ns, "a-x")).To(BeNil(), "its own object is deleted")
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "another instance's object is not deleted")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b")).NotTo(BeNil())
}

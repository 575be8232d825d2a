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
	e.g.Expect(got.Action).To(Equal("Failed"), "%+v", res)
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
	e.g.Expect(result(res, e.ns, "a").Action).To(Equal("Skipped"), "%+v", res)
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
	e.g.Expect(result(e.sync(repo), e.ns, "a").Action).To(Equal("Skipped"))

	a.extra = ""
	sha := repo.commit("resume a", map[string]string{"instances/a.yaml": a.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(Equal("Updated"), "%+v", res)
	mi = e.instance(e.ns, "a")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(sha))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil())
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-x")).To(BeTrue())
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/test/harness"
)

// Each test here shows the effect of one spec field that no other test showed.

// TestWaitFalseDoesNotWaitForHealth: with spec.wait: false an object that never
// becomes Current (a claim nothing binds) does not hold the instance back, and no
// Healthy condition claims anything (wait: true: TestHealthyConditionFollowsTheHealthWait).
func TestWaitFalseDoesNotWaitForHealth(t *testing.T) {
	e := newEnv(t)
	files := appRepo("")
	files["modules/claim/claim.cue"] = claimModule
	files["instances/claim.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: claim\n  namespace: " + e.ns +
		"\nspec:\n  module:\n    local:\n      path: ./modules/claim\n  timeout: 3s\n  wait: false\n"
	res := e.sync(newGitRepo(t, files))
	e.g.Expect(result(res, e.ns, "claim").Ready).To(BeTrue(), "%+v", res)
	mi := e.instance(e.ns, "claim")
	e.g.Expect(conditions.Has(mi, cairnv1.HealthyCondition)).To(BeFalse())
	e.g.Expect(e.get("v1", "PersistentVolumeClaim", e.ns, "claim")).NotTo(BeNil())
}

// TestDriftIgnoreSkipsTheDriftCheck: spec.drift: Ignore leaves an instance out of the
// drift check (Correct and Warn: TestDriftCheck).
func TestDriftIgnoreSkipsTheDriftCheck(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, appRepo("", inst{name: "free", ns: e.ns, replicas: 1, extra: "  drift: Ignore\n"}))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	e.scale("free", 3)
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, r := range reports {
		e.g.Expect(r.Namespace).NotTo(Equal(e.ns), "an instance with drift: Ignore is not checked: %+v", r)
	}
	e.g.Expect(e.replicas("free")).To(Equal(int32(3)))
	e.g.Expect(conditions.Has(e.instance(e.ns, "free"), cairnv1.DriftedCondition)).To(BeFalse())
}

// TestNamespaceAllowListRefusesOtherNamespaces: Platform spec.namespaces.allow
// refuses a rendered object in a namespace no pattern allows, naming it (deny:
// TestBadDeclarationsKeepLastGoodState).
func TestNamespaceAllowListRefusesOtherNamespaces(t *testing.T) {
	e := newEnv(t)
	outside := "elsewhere-" + strings.TrimPrefix(e.ns, "team-")
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: "    namespaces: [" + outside + "]\n"}
	files := appRepo("", a)
	files["platform.yaml"] = "apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: cluster\nspec:\n" +
		"  namespaces:\n    allow: [\"team-*\"]\n"
	res := e.sync(newGitRepo(t, files))
	r := result(res, e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonNamespaceDenied))
	e.g.Expect(r.Message).To(ContainSubstring(`Namespace/` + outside + `: namespace "` + outside + `" is not allowed`))
	e.g.Expect(e.get("v1", "Namespace", "", outside)).To(BeNil(), "nothing written")
}

// TestPlatformProtectedKindsReplaceTheDefaults: Platform spec.prune.protectedKinds
// names the kinds prune never deletes (defaults: TestProtectedKindsAndForeignLabelsAreNotPruned).
func TestPlatformProtectedKindsReplaceTheDefaults(t *testing.T) {
	e := newEnv(t)
	r := e.syncThenDropY("  prune:\n    protectedKinds: [ConfigMap]\n", "")
	e.g.Expect(r.Message).To(ContainSubstring("kept 1 object(s) of protected kinds"))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "ConfigMap is protected by the Platform")
}

// TestDependsOnAnotherNamespace: dependsOn[].namespace names an instance of another
// namespace; it is applied and ready first.
func TestDependsOnAnotherNamespace(t *testing.T) {
	e := newEnv(t)
	other := e.ns + "-base"
	e.deleteNamespacesAtEnd(other)
	base := inst{name: "base", ns: other, replicas: 1}
	app := inst{name: "app", ns: e.ns, replicas: 1, extra: "  dependsOn:\n    - {name: base, namespace: " + other + "}\n"}
	res := e.sync(newGitRepo(t, appRepo("", base, app)))
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	log := e.progress.String()
	e.g.Expect(strings.Index(log, other+"/base ready")).To(BeNumerically(">=", 0), log)
	e.g.Expect(strings.Index(log, other+"/base ready")).To(BeNumerically("<", strings.Index(log, "apply "+e.ns+"/app:")), log)
}

// TestRegistryTimeoutBoundsEachRequest: Registry spec.timeout bounds each request to a
// registry that accepts connections and never answers: the instance fails in seconds
// (transient, retried), not after the 30 s default nor its own 1 m timeout.
func TestRegistryTimeoutBoundsEachRequest(t *testing.T) {
	e := newEnv(t)
	addr := harness.HangingListener(t)
	files := map[string]string{
		"platform.yaml":        platformWithVerify("Off", ""),
		"registries.yaml":      registryYAML("hangs", addr, true, "  timeout: 1s\n"),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, "oci://"+addr+"/charts/hello", "0.1.0", ""),
	}
	begin := time.Now()
	res := e.sync(newGitRepo(t, files))
	took := time.Since(begin)
	r := result(res, e.ns, "hello")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(r.Retry).To(Equal(outcome.Transient), "%+v", r)
	e.g.Expect(took).To(BeNumerically("<", 20*time.Second), "bounded by the Registry's timeout, not the default: %+v", r)
}

// TestPruneFalseKeepsWhatLeavesTheRender: with spec.prune: false an object that
// leaves the render of an instance that stays is left in place.
func TestPruneFalseKeepsWhatLeavesTheRender(t *testing.T) {
	e := newEnv(t)
	r := e.syncThenDropY("", "  prune: false\n")
	e.g.Expect(r.Pruned).To(Equal(0))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil())
}

// TestPruneProtectedLetsAStayingInstancePruneANamespace: spec.pruneProtected: true
// lets prune delete an object of a protected kind (a Namespace) that left the render,
// under a Platform that grants it (spec.limits.allowPruneProtected).
func TestPruneProtectedLetsAStayingInstancePruneANamespace(t *testing.T) {
	e := newEnv(t)
	extraNS := e.ns + "-extra"
	e.deleteNamespacesAtEnd(extraNS)
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: "    namespaces: [" + extraNS + "]\n  pruneProtected: true\n"}
	repo := newGitRepo(t, appRepo("  limits: {allowPruneProtected: true}\n", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	e.g.Expect(e.get("v1", "Namespace", "", extraNS)).NotTo(BeNil())
	a.extra = "  pruneProtected: true\n"
	repo.commit("drop the namespace", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(r.Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "Namespace", "", extraNS)).To(BeTrue())
}

// syncThenDropY syncs instance a with ConfigMaps a-x and a-y (the Platform's spec and
// the instance's spec get the extra lines), then a commit that drops a-y; it returns
// that sync's result for a, which must be ready.
func (e *env) syncThenDropY(platformExtra, instanceExtra string) reconciler.InstanceResult {
	e.t.Helper()
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y"), extra: instanceExtra}
	repo := newGitRepo(e.t, appRepo(platformExtra, a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	a.configs = configs("x")
	repo.commit("drop y", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", res)
	return r
}

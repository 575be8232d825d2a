package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

const guardedPrune = `  prune:
    maxDeletions: 3
    maxPercent: 50
`

func TestPruneGuardMaxPercentThenAllowedByTrailer(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("w", "x", "y")}
	repo := newGitRepo(t, appRepo(guardedPrune, a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())

	// 3 of 4 objects would go: over maxPercent 50.
	a.configs = map[string]string{}
	repo.commit("drop all configs", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneGuard))
	e.g.Expect(r.Message).To(And(ContainSubstring("maxPercent 50"), ContainSubstring("3 of its 4")))
	e.g.Expect(e.configMap(e.ns, "a-w")).NotTo(BeNil())
	mi := e.instance(e.ns, "a")
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	e.g.Expect(mi.Status.Inventory.Count).To(Equal(int32(4)), "stale objects stay in the inventory")

	// The trailer lets this commit delete them.
	repo.commit("drop all configs\n\ncairn-allow-prune: 3", map[string]string{"README.md": "allowed\n"})
	res = e.sync(repo)
	r = result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", r)
	e.g.Expect(r.Pruned).To(Equal(3))
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-w")).To(BeTrue())
}

func TestPruneGuardMaxDeletions(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("a", "b", "c", "d", "e", "f", "g", "h")}
	repo := newGitRepo(t, appRepo("  prune:\n    maxDeletions: 3\n", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	a.configs = configs("a", "b", "c", "d")
	repo.commit("drop four", map[string]string{"instances/a.yaml": a.yaml()})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneGuard))
	e.g.Expect(r.Message).To(ContainSubstring("would delete 4 objects, over prune.maxDeletions 3"))
	e.g.Expect(e.configMap(e.ns, "a-h")).NotTo(BeNil())
}

func TestPruneGuardHalfOfInstancesRemoved(t *testing.T) {
	e := newEnv(t)
	insts := []inst{
		{name: "a", ns: e.ns, replicas: 0}, {name: "b", ns: e.ns, replicas: 0}, {name: "c", ns: e.ns, replicas: 0},
	}
	repo := newGitRepo(t, appRepo("", insts...))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	repo.commit("remove two", map[string]string{"instances/a.yaml": "", "instances/b.yaml": ""})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Reason).To(Equal(cairnv1.ReasonPruneGuard))
	e.g.Expect(result(res, e.ns, "a").Message).To(ContainSubstring("removes 2 of 3 instances"))
	e.g.Expect(e.instance(e.ns, "a")).NotTo(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b")).NotTo(BeNil())
}

func TestEmptyRenderNeverPrunes(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("  limits: {allowEmpty: true}\n", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	a.configs = map[string]string{}
	a.extra = ""
	empty := replaceOnce(a.yaml(), "    configs:\n", "    enabled: false\n    configs:\n")
	repo.commit("render nothing", map[string]string{"instances/a.yaml": empty})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneGuard))
	e.g.Expect(r.Message).To(ContainSubstring("render is empty"))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a")).NotTo(BeNil())

	// spec.allowEmpty: true lets the empty render prune every object.
	repo.commit("render nothing, on purpose", map[string]string{"instances/a.yaml": empty + "  allowEmpty: true\n"})
	r = result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", r)
	e.g.Expect(r.Pruned).To(Equal(2))
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeTrue())
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-x")).To(BeTrue())
}

func TestProtectedKindsAndForeignLabelsAreNotPruned(t *testing.T) {
	e := newEnv(t)
	extraNS := e.ns + "-extra"
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y", "z"),
		extra: "    namespaces: [" + extraNS + "]\n"}
	// the extra line lands under values because it follows the configs map.
	repo := newGitRepo(t, appRepo("", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse(), "%+v", e)
	e.g.Expect(e.get("v1", "Namespace", "", extraNS)).NotTo(BeNil())

	// Someone takes ConfigMap a-y over: it loses cairn's instance label.
	cm := e.configMap(e.ns, "a-y")
	delete(cm.Labels, cairnv1.InstanceLabel)
	e.g.Expect(e.c.Update(context.Background(), cm)).To(Succeed())

	a.configs = configs("x")
	a.extra = ""
	repo.commit("drop y, z and the namespace", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", r)
	e.g.Expect(r.Message).To(ContainSubstring("protected kinds"))
	e.g.Expect(e.get("v1", "Namespace", "", extraNS)).NotTo(BeNil(), "Namespace is protected")
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "a-y no longer carries our label")
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-z")).To(BeTrue())
}

func TestNoPruneAfterFailedApply(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y")}
	repo := newGitRepo(t, appRepo("", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	a.configs = configs("x")
	bad := replaceOnce(a.yaml(), "    configs:\n", "    badService: true\n    configs:\n")
	repo.commit("drop y and add an invalid Service", map[string]string{"instances/a.yaml": bad})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	e.g.Expect(r.Message).To(ContainSubstring("Service/" + e.ns + "/a-bad"))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "no prune after a failed apply")
	e.g.Expect(e.get("v1", "Service", e.ns, "a-bad")).To(BeNil())
}

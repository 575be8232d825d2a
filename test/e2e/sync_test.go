package e2e

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestFirstSyncCreatesEverythingInOrder(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, appRepo("",
		inst{name: "a", ns: e.ns, replicas: 2, configs: configs("x")},
		inst{name: "b", ns: e.ns, replicas: 1, dependsOn: []string{"a"}},
		inst{name: "c", ns: e.ns, replicas: 1, dependsOn: []string{"b"}},
	))
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	for _, name := range []string{"a", "b", "c"} {
		r := result(res, e.ns, name)
		e.g.Expect(r.Action).To(BeEquivalentTo("Created"), name)
		e.g.Expect(r.Ready).To(BeTrue(), name)
		mi := e.instance(e.ns, name)
		e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(res.Revision))
		e.g.Expect(isTrue(mi, "Ready")).To(BeTrue())
		e.g.Expect(mi.Status.Inventory.Count).To(BeNumerically(">=", 1))
	}
	// health was waited on: the Deployment of a is Available with 2 replicas.
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "a"}, &d)).To(Succeed())
	e.g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)))
	e.g.Expect(d.Labels).To(HaveKeyWithValue(cairnv1.ManagedByLabel, "cairn"))
	e.g.Expect(d.Labels).To(HaveKeyWithValue(cairnv1.InstanceLabel, e.ns+".a"))
	e.g.Expect(e.configMap(e.ns, "a-x").Data).To(HaveKeyWithValue("value", "v-x"))
	// dependsOn order: a was ready before b was applied, b before c.
	log := e.progress.String()
	at := func(line string) int {
		i := strings.Index(log, line)
		e.g.Expect(i).To(BeNumerically(">=", 0), "progress line %q in:\n%s", line, log)
		return i
	}
	e.g.Expect(at(e.ns + "/a ready")).To(BeNumerically("<", at("apply "+e.ns+"/b:")))
	e.g.Expect(at(e.ns + "/b ready")).To(BeNumerically("<", at("apply "+e.ns+"/c:")))
	var p cairnv1.Platform
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: "cluster"}, &p)).To(Succeed())
	e.g.Expect(p.Status.LastSyncedRevision).To(Equal(res.Revision))

	// A second sync of the same commit touches nothing.
	again := e.sync(repo)
	for _, name := range []string{"a", "b", "c"} {
		e.g.Expect(result(again, e.ns, name).Action).To(BeEquivalentTo("Unchanged"), name)
	}
}

func TestValueChangeReappliesOnlyThatInstance(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1}
	b := inst{name: "b", ns: e.ns, replicas: 1}
	repo := newGitRepo(t, appRepo("", a, b))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	historyA := len(e.instance(e.ns, "a").Status.History)

	b.replicas = 3
	sha := repo.commit("scale b", map[string]string{"instances/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "b").Action).To(BeEquivalentTo("Updated"))
	e.g.Expect(result(res, e.ns, "b").Applied).To(Equal(1))
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(e.instance(e.ns, "a").Status.History).To(HaveLen(historyA), "a was not re-applied")
	e.g.Expect(e.instance(e.ns, "b").Status.LastAppliedRevision).To(Equal(sha))
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "b"}, &d)).To(Succeed())
	e.g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
}

func TestObjectRemovedFromModuleIsPruned(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x", "y", "z")}
	repo := newGitRepo(t, appRepo("", a))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	e.g.Expect(e.configMap(e.ns, "a-z")).NotTo(BeNil())

	a.configs = configs("x", "y")
	repo.commit("drop z", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "a").Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-z")).To(BeTrue())
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil())
	e.g.Expect(e.instance(e.ns, "a").Status.Inventory.Count).To(Equal(int32(3)))
}

func TestInstanceFileRemovedDeletesObjectsAndCR(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x")}
	b := inst{name: "b", ns: e.ns, replicas: 1}
	c := inst{name: "c", ns: e.ns, replicas: 1}
	repo := newGitRepo(t, appRepo("", a, b, c))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())

	repo.commit("remove a", map[string]string{"instances/a.yaml": ""})
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Deleted"))
	e.g.Expect(result(res, e.ns, "a").Pruned).To(Equal(2))
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeTrue())
	e.g.Expect(e.gone("v1", "ConfigMap", e.ns, "a-x")).To(BeTrue())
	e.g.Expect(e.instance(e.ns, "a")).To(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "b")).NotTo(BeNil())
}

func TestRenderErrorInOneInstanceLeavesOthersConverging(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x")}
	b := inst{name: "b", ns: e.ns, replicas: 1}
	dep := inst{name: "dep", ns: e.ns, replicas: 1, dependsOn: []string{"a"}}
	repo := newGitRepo(t, appRepo("", a, b, dep))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	good := e.instance(e.ns, "a").Status.LastAppliedRevision

	// a gets a value its module rejects and loses a config; b changes too.
	a.configs = map[string]string{}
	a.extra = "  drift: Correct\n"
	// the declaration stays valid; the values break the module's constraint
	broken := replaceOnce(a.yaml(), "replicas: 1", "replicas: -4")
	b.replicas = 2
	repo.commit("break a", map[string]string{"instances/a.yaml": broken, "instances/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeTrue())
	ra := result(res, e.ns, "a")
	e.g.Expect(ra.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(ra.Reason).To(Equal("RenderFailed"))
	e.g.Expect(ra.Message).To(ContainSubstring("replicas"))
	e.g.Expect(result(res, e.ns, "b").Ready).To(BeTrue())
	e.g.Expect(result(res, e.ns, "dep").Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(result(res, e.ns, "dep").Reason).To(Equal(cairnv1.ReasonDependencyNotReady))
	// nothing of a was deleted and its last good state stays recorded.
	e.g.Expect(e.configMap(e.ns, "a-x")).NotTo(BeNil())
	mi := e.instance(e.ns, "a")
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good))
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	e.g.Expect(mi.Status.Inventory.Count).To(Equal(int32(2)))
}

func TestKubectlEditOfTheCRIsReverted(t *testing.T) {
	e := newEnv(t)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns, replicas: 1}))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())
	mi := e.instance(e.ns, "a")
	mi.Spec.Suspend = true
	e.g.Expect(e.c.Update(e.ctx, mi)).To(Succeed())

	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	mi = e.instance(e.ns, "a")
	e.g.Expect(mi.Spec.Suspend).To(BeFalse())
	e.g.Expect(mi.Status.ObservedGeneration).To(Equal(mi.Generation))
}

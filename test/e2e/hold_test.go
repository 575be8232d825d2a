package e2e

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/cairn/reconciler/lease"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// TestHoldAndRelease: `cairn hold` (no controller runs: it records the hold at
// once, holding the sync Lease) keeps an instance at its render through a commit
// that changes it (not applied, the plan says it waits for the release) and one
// that changes another instance (applied to that one), and through a new engine
// (the hold lives in the cluster); `cairn status` shows it HELD. `cairn release`
// and the next sync apply what waited. A hold --until-change is kept through a
// commit that changes another instance (its dependency) and ends, by itself, at
// the first commit that changes the held one, which is applied. A held instance
// that leaves Git keeps its objects until it is released.
func TestHoldAndRelease(t *testing.T) {
	e := newEnv(t)
	bin, a, b, repo := holdEnv(e)
	e.freeSyncLease() // no controller runs: the commands act at once
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	heldDigest := e.instance(e.ns, "a").Status.RenderDigest
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}

	out := e.runCairn(bin, append([]string{"hold", e.ns + "/a"}, kube...)...)
	e.g.Expect(out).To(ContainSubstring("held at " + heldDigest))
	mi := e.instance(e.ns, "a")
	e.g.Expect(mi.Status.Held).NotTo(BeNil())
	e.g.Expect(mi.Status.Held.RenderDigest).To(Equal(heldDigest))
	e.g.Expect(mi.Status.Held.By).NotTo(BeEmpty(), "who asked, as the cluster authenticated them")
	e.g.Expect(conditions.IsTrue(mi, cairnv1.HeldCondition)).To(BeTrue())
	e.g.Expect(conditions.GetMessage(mi, cairnv1.HeldCondition)).To(ContainSubstring("by " + mi.Status.Held.By))

	a.configs, b.configs = configs("x", "y"), configs("x", "y")
	repo.commit("a and b change", map[string]string{"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml()})
	plan := e.plan(repo)
	e.g.Expect(plan.Markdown()).To(ContainSubstring("`" + e.ns + "/a` is held at " + heldDigest))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("this change applies when released"))
	res = e.sync(repo)
	got := result(res, e.ns, "a")
	e.g.Expect(got.Action).To(Equal(outcome.ActionSkipped), "%+v", got)
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonHeld))
	e.g.Expect(got.Ready).To(BeTrue(), "held at a good render")
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "the held instance's change is not applied")
	e.g.Expect(e.configMap(e.ns, "b-y")).NotTo(BeNil(), "the other instance follows Git")

	e.withEngine(render.RendererOptions{}, func(*reconciler.Options) {}) // another process: the hold is in the cluster
	e.sync(repo)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "still held")
	out = e.runCairn(bin, append([]string{"status"}, kube...)...)
	e.g.Expect(out).To(MatchRegexp(`(?m)^` + e.ns + ` +a +True .* ` + shortDigest(heldDigest) + ` `))

	out = e.runCairn(bin, append([]string{"release", e.ns + "/a"}, kube...)...)
	e.g.Expect(out).To(ContainSubstring("released"))
	e.g.Expect(e.instance(e.ns, "a").Annotations).NotTo(HaveKey(cairnv1.HoldAnnotation), "the release recorded, its request goes")
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "released: the change applies")
	mi = e.instance(e.ns, "a")
	e.g.Expect(mi.Status.Held).To(BeNil())
	e.g.Expect(conditions.Has(mi, cairnv1.HeldCondition)).To(BeFalse())

	// --until-change, asked while a change of a is pushed but not synced yet: that
	// change is held too; the next commit that changes a ends the hold.
	a.configs = configs("x", "y", "p")
	repo.commit("a change pending", map[string]string{"instances/a.yaml": a.yaml()})
	e.runCairn(bin, append([]string{"hold", e.ns + "/a", "--until-change"}, kube...)...)
	b.configs = configs("x", "y", "z")
	repo.commit("b changes", map[string]string{"instances/b.yaml": b.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Reason).To(Equal(cairnv1.ReasonHeld), "a commit that does not change it: still held")
	e.g.Expect(e.configMap(e.ns, "a-p")).To(BeNil(), "the change pending when the hold was asked is held")
	e.g.Expect(e.instance(e.ns, "a").Status.Held).NotTo(BeNil())
	a.configs = configs("x", "y", "z")
	repo.commit("the fix lands", map[string]string{"instances/a.yaml": a.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "a-z")).NotTo(BeNil(), "the commit that changes it ends the hold and applies")
	e.g.Expect(e.configMap(e.ns, "a-p")).To(BeNil())
	mi = e.instance(e.ns, "a")
	e.g.Expect(mi.Status.Held).To(BeNil())
	e.g.Expect(mi.Annotations).NotTo(HaveKey(cairnv1.HoldAnnotation))
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(Equal(outcome.ActionUnchanged), "released for good")

	// Held, then removed from Git: its objects stay until the release.
	e.runCairn(bin, append([]string{"hold", e.ns + "/a"}, kube...)...)
	repo.commit("a leaves Git", map[string]string{"instances/a.yaml": ""})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Reason).To(Equal(cairnv1.ReasonHeld), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "a-z")).NotTo(BeNil(), "a held instance is not removed")
	e.runCairn(bin, append([]string{"release", e.ns + "/a"}, kube...)...)
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(Equal(outcome.ActionDeleted), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "a-z")).To(BeNil(), "released: removed")
}

// shortDigest is the HELD column of cairn status: a digest's first 12 hex digits.
func shortDigest(d string) string {
	_, hex, _ := strings.Cut(d, ":")
	return hex[:12]
}

// TestHoldUnderTheController: under `cairn controller`, `cairn hold` asks through
// the annotation and waits until the controller records the hold; a commit that
// changes the held instance is not applied, while one to another instance is; the
// hold survives the controller's failover (SIGKILL, another process leads); `cairn
// release` waits until the controller records the release, and the change applies.
func TestHoldUnderTheController(t *testing.T) {
	e := newEnv(t)
	bin, a, b, repo := holdEnv(e)
	args := e.controllerArgs(t, repo, freeLoopbackAddr(t), "0")
	first := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, args...)
	ready := func(name string) func() bool {
		return func() bool { mi := e.instance(e.ns, name); return mi != nil && conditions.IsTrue(mi, "Ready") }
	}
	e.g.Eventually(ready("a"), time.Minute, 200*time.Millisecond).Should(BeTrue(), first.String)
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}

	out := e.runCairn(bin, append([]string{"hold", e.ns + "/a"}, kube...)...)
	e.g.Expect(out).To(ContainSubstring("held at "), "it waited for the controller to record it")
	e.g.Expect(e.instance(e.ns, "a").Status.Held).NotTo(BeNil())

	a.configs, b.configs = configs("x", "y"), configs("x", "y")
	repo.commit("a and b change", map[string]string{"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml()})
	e.g.Eventually(func() bool { return e.configMap(e.ns, "b-y") != nil }, time.Minute, 200*time.Millisecond).Should(BeTrue(), first.String)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "held")

	e.g.Expect(first.cmd.Process.Kill()).To(Succeed())
	<-first.done
	second := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"}, args...)
	e.g.Eventually(e.leaseHolder, 30*time.Second, 200*time.Millisecond).Should(HavePrefix("cairn-1_"), second.String)
	b.configs = configs("x", "y", "z")
	repo.commit("b changes again", map[string]string{"instances/b.yaml": b.yaml()})
	e.g.Eventually(func() bool { return e.configMap(e.ns, "b-z") != nil }, time.Minute, 200*time.Millisecond).Should(BeTrue(), second.String)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "still held after the failover")

	out = e.runCairn(bin, append([]string{"release", e.ns + "/a"}, kube...)...)
	e.g.Expect(out).To(ContainSubstring("released"))
	e.g.Eventually(func() []string {
		var reasons []string
		for _, ev := range e.eventsAbout(e.ns, e.instance(e.ns, "a").UID) {
			if ev.Reason == cairnv1.ReasonReleased || ev.Reason == cairnv1.ReasonHeld {
				reasons = append(reasons, ev.Reason+": "+ev.Note)
			}
		}
		return reasons
	}, 10*time.Second, 200*time.Millisecond).Should(ContainElements(
		ContainSubstring(cairnv1.ReasonHeld+": held at "), MatchRegexp(cairnv1.ReasonReleased+": released by .+ \\(cairn release\\)")),
		"the Events name who asked")
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-y") != nil }, time.Minute, 200*time.Millisecond).
		Should(BeTrue(), "released: the change applies\n%s", second.String())
}

// holdEnv readies e for the hold tests: the cairn binary, cairn's namespace (the
// sync Lease), and a repository of two instances of the app module, a, which
// depends on b, and b.
func holdEnv(e *env) (string, inst, inst, *gitRepo) {
	bin := buildCairn(e.t)
	e.ensureCairnNamespace()
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), dependsOn: []string{"b"}} // held, its dependency changes
	b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("x")}
	return bin, a, b, newGitRepo(e.t, appRepo("", a, b))
}

// freeSyncLease deletes the sync Lease a controller of an earlier test may have
// left (killed, it did not release it): the tests that run no controller expect
// none, as a cluster where no controller runs has none that is live.
func (e *env) freeSyncLease() {
	e.t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: lease.Name}}
	if err := e.c.Delete(e.ctx, l); err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
}

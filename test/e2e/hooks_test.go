package e2e

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

// TestHookPreInstallMakesWhatTheReleaseNeeds: on the first sync the pre-install hooks
// run before the release's objects, in weight order, the Job waited on to completion:
// the Secret the Deployment mounts exists before the Deployment, and the Job completed
// before it was created; the Deployment becomes Ready. The post-install hook runs
// once the release is healthy. Hooks carry cairn's labels and are not in the
// inventory; the plan lists them apart. A sync that does not change the render runs
// no hook: a hook object deleted by hand stays deleted.
func TestHookPreInstallMakesWhatTheReleaseNeeds(t *testing.T) {
	e := newEnv(t)
	repo, _ := e.hookedRepo(t)
	plan := e.plan(repo)
	e.g.Expect(plan.Instances).To(HaveLen(1))
	e.g.Expect(plan.Instances[0].Hooks).To(Equal([]reconciler.HookPlan{
		{Event: "pre-install", Weight: -5, Object: "Secret/" + e.ns + "/web-setup", Source: "hooked/templates/hooks.yaml"},
		{Event: "pre-install", Weight: 0, Object: "Job/" + e.ns + "/web-migrate", Source: "hooked/templates/hooks.yaml"},
		{Event: "post-install", Weight: 0, Object: "ConfigMap/" + e.ns + "/web-done", Source: "hooked/templates/hooks.yaml"},
	}))
	e.g.Expect(plan.Instances[0].Create).NotTo(ContainElement(ContainSubstring("web-setup")))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("pre-install (weight -5) Secret/" + e.ns + "/web-setup"))

	res := e.sync(repo)
	web := result(res, e.ns, "web")
	e.g.Expect(web.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(web.Message).To(ContainSubstring("hooks run: 2 pre-install, 1 post-install"))

	secret, job := e.get("v1", "Secret", e.ns, "web-setup"), e.get("batch/v1", "Job", e.ns, "web-migrate")
	deploy, done := e.get("apps/v1", "Deployment", e.ns, "web"), e.get("v1", "ConfigMap", e.ns, "web-done")
	e.g.Expect(secret).NotTo(BeNil())
	e.g.Expect(secret.GetLabels()).To(HaveKeyWithValue(cairnv1.InstanceLabel, cairnv1.InstanceKey(e.ns, "web")))
	e.g.Expect(job).NotTo(BeNil())
	e.g.Expect(jobCompleted(job)).NotTo(BeZero(), "the pre-install Job completed")
	e.g.Expect(created(secret)).To(BeTemporally("<=", created(job)))
	e.g.Expect(jobCompleted(job)).To(BeTemporally("<=", created(deploy)), "the Job completed before the Deployment was applied")
	e.g.Expect(done).NotTo(BeNil())
	e.g.Expect(done.Object["data"]).To(HaveKeyWithValue("greeting", "hello"))
	log := e.progress.String()
	pre, apply := strings.Index(log, "hooks "+e.ns+"/web: pre-install"), strings.Index(log, "apply "+e.ns+"/web:")
	wait, post := strings.Index(log, "wait "+e.ns+"/web"), strings.Index(log, "hooks "+e.ns+"/web: post-install")
	e.g.Expect(pre).To(BeNumerically(">=", 0), log)
	e.g.Expect(pre).To(BeNumerically("<", apply), "pre-install hooks, apply, wait, then post-install: %s", log)
	e.g.Expect(apply).To(BeNumerically("<", wait), log)
	e.g.Expect(wait).To(BeNumerically("<", post), log)
	for _, entry := range e.instance(e.ns, "web").Status.Inventory.Entries {
		e.g.Expect(entry.ID).NotTo(ContainSubstring("web-setup"), "hooks are not in the inventory")
		e.g.Expect(entry.ID).NotTo(ContainSubstring("web-done"), "hooks are not in the inventory")
	}

	// An unchanged render runs no hooks.
	e.g.Expect(e.c.Delete(e.ctx, done)).To(Succeed())
	repo.commit("unrelated", map[string]string{"README.md": "hello\n"})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Message).NotTo(ContainSubstring("hooks run"))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-done")).To(BeNil(), "no post-install hook ran again")
}

// TestHookUpgradeAndDeletePolicies: a changed render runs the pre-upgrade hooks: the
// Job of before-hook-creation is deleted and created again (a new UID, complete), the
// cleanup Job of hook-succeeded is gone once it succeeded; the post-upgrade hook
// updates its ConfigMap; the pre-install Secret is not touched.
func TestHookUpgradeAndDeletePolicies(t *testing.T) {
	e := newEnv(t)
	repo, web := e.hookedRepo(t)
	first := e.sync(repo)
	e.g.Expect(result(first, e.ns, "web").Ready).To(BeTrue(), "%+v", first)
	firstJob, secret := e.get("batch/v1", "Job", e.ns, "web-migrate"), e.get("v1", "Secret", e.ns, "web-setup")

	repo.commit("bonjour", map[string]string{"instances/web.yaml": web("web", "    greeting: bonjour\n")})
	res := e.sync(repo)
	r := result(res, e.ns, "web")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(r.Message).To(ContainSubstring("hooks run: 2 pre-upgrade, 1 post-upgrade"))
	job := e.get("batch/v1", "Job", e.ns, "web-migrate")
	e.g.Expect(job.GetUID()).NotTo(Equal(firstJob.GetUID()), "before-hook-creation: created again")
	e.g.Expect(jobCompleted(job)).NotTo(BeZero())
	e.g.Expect(e.get("batch/v1", "Job", e.ns, "web-cleanup")).To(BeNil(), "hook-succeeded: deleted once it succeeded")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-done").Object["data"]).To(HaveKeyWithValue("greeting", "bonjour"))
	e.g.Expect(e.get("v1", "Secret", e.ns, "web-setup").GetUID()).To(Equal(secret.GetUID()), "pre-install only")
	e.g.Expect(e.configMap(e.ns, "web-config").Data).To(HaveKeyWithValue("greeting", "bonjour"))
}

// TestHookFailureAppliesNothingAfterIt: a pre-upgrade Job that fails fails the
// instance with HookFailed, naming the hook and the Job's message; the hook after it
// never runs, the release's changes are not applied and the object the render
// dropped is not pruned; the failed Job is deleted (hook-failed). On a first sync the
// same failure leaves the release's objects uncreated.
func TestHookFailureAppliesNothingAfterIt(t *testing.T) {
	e := newEnv(t)
	repo, web := e.hookedRepo(t)
	repo.commit("extra", map[string]string{"instances/web.yaml": web("web", "    greeting: hello\n    extra: true\n")})
	first := e.sync(repo)
	e.g.Expect(result(first, e.ns, "web").Ready).To(BeTrue(), "%+v", first)
	e.g.Expect(e.configMap(e.ns, "web-extra")).NotTo(BeNil())

	repo.commit("doomed", map[string]string{"instances/web.yaml": web("web", "    greeting: bonjour\n    fail: true\n"),
		"instances/fresh.yaml": web("fresh", "    fail: true\n")})
	res := e.sync(repo)
	r := result(res, e.ns, "web")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonHookFailed))
	e.g.Expect(r.Message).To(ContainSubstring("pre-upgrade hook Job/" + e.ns + "/web-doomed (hooked/templates/hooks.yaml) failed"))
	e.g.Expect(r.Message).To(ContainSubstring("DeadlineExceeded"))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-after-doomed")).To(BeNil(), "the hook after the failed one never ran")
	e.g.Expect(e.configMap(e.ns, "web-config").Data).To(HaveKeyWithValue("greeting", "hello"), "nothing applied")
	e.g.Expect(e.configMap(e.ns, "web-extra")).NotTo(BeNil(), "nothing pruned")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-done").Object["data"]).To(HaveKeyWithValue("greeting", "hello"), "no post-upgrade hook")
	e.g.Expect(e.get("batch/v1", "Job", e.ns, "web-doomed")).To(BeNil(), "hook-failed: deleted")
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Reason", cairnv1.ReasonHookFailed))))

	// A first sync that fails in its pre-install hooks creates none of the release.
	fresh := result(res, e.ns, "fresh")
	e.g.Expect(fresh.Reason).To(Equal(cairnv1.ReasonHookFailed), "%+v", res)
	e.g.Expect(fresh.Message).To(ContainSubstring("pre-install hook Job/" + e.ns + "/fresh-doomed"))
	e.g.Expect(e.get("v1", "Secret", e.ns, "fresh-setup")).NotTo(BeNil(), "the hooks before the failed one ran")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "fresh")).To(BeNil())
	e.g.Expect(e.configMap(e.ns, "fresh-config")).To(BeNil())
}

// TestHookDeleteOnRemoval: removing the instance from Git runs its pre-delete hook
// before its objects are deleted and its post-delete hook after; the objects of its
// install hooks go with it, and so does its hook record.
func TestHookDeleteOnRemoval(t *testing.T) {
	e := newEnv(t)
	repo, _ := e.hookedRepo(t)
	first := e.sync(repo)
	e.g.Expect(result(first, e.ns, "web").Ready).To(BeTrue(), "%+v", first)
	record := e.get("v1", "Secret", reconciler.DefaultNamespace, "cairn-hooks-"+e.ns+".web")
	e.g.Expect(record).NotTo(BeNil(), "the hook record of the instance")

	plan := e.plan(withCommit(repo, "remove\n\ncairn-allow-prune: 100", map[string]string{"instances/web.yaml": ""}))
	e.g.Expect(plan.Instances[0].Hooks).To(Equal([]reconciler.HookPlan{
		{Event: "pre-delete", Object: "ConfigMap/" + e.ns + "/web-bye", Source: "hooked/templates/hooks.yaml"},
		{Event: "post-delete", Object: "ConfigMap/" + e.ns + "/web-gone", Source: "hooked/templates/hooks.yaml"},
	}))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Action).To(BeEquivalentTo("Deleted"), "%+v", res)
	e.g.Expect(e.instance(e.ns, "web")).To(BeNil())
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "web")).To(BeTrue())
	bye, gone := e.get("v1", "ConfigMap", e.ns, "web-bye"), e.get("v1", "ConfigMap", e.ns, "web-gone")
	e.g.Expect(bye).NotTo(BeNil(), "pre-delete ran")
	e.g.Expect(gone).NotTo(BeNil(), "post-delete ran")
	log := e.progress.String()
	e.g.Expect(strings.Index(log, "hooks "+e.ns+"/web: pre-delete")).To(BeNumerically("<", strings.Index(log, "remove "+e.ns+"/web:")), log)
	e.g.Expect(strings.Index(log, "remove "+e.ns+"/web:")).To(BeNumerically("<", strings.Index(log, "hooks "+e.ns+"/web: post-delete")), log)
	e.g.Expect(e.gone("v1", "Secret", e.ns, "web-setup")).To(BeTrue(), "install hooks go with the instance")
	e.g.Expect(e.gone("batch/v1", "Job", e.ns, "web-migrate")).To(BeTrue(), "install hooks go with the instance")
	e.g.Expect(e.get("v1", "Secret", reconciler.DefaultNamespace, "cairn-hooks-"+e.ns+".web")).To(BeNil())
}

// TestHookPreDeleteFailureStopsRemoval: a pre-delete hook that fails stops the
// removal: the instance fails with HookFailed naming the hook, and its CR and objects
// stay.
func TestHookPreDeleteFailureStopsRemoval(t *testing.T) {
	e := newEnv(t)
	repo, inst := e.hookedRepo(t)
	repo.commit("fail on delete", map[string]string{"instances/web.yaml": inst("web", "    failDelete: true\n")})
	first := e.sync(repo)
	e.g.Expect(result(first, e.ns, "web").Ready).To(BeTrue(), "%+v", first)

	repo.commit("remove\n\ncairn-allow-prune: 100", map[string]string{"instances/web.yaml": ""})
	res := e.sync(repo)
	r := result(res, e.ns, "web")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", res)
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonHookFailed))
	e.g.Expect(r.Message).To(ContainSubstring("pre-delete hook Job/" + e.ns + "/web-doomed-delete"))
	e.g.Expect(r.Message).To(ContainSubstring("DeadlineExceeded"))
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi).NotTo(BeNil(), "the CR stays")
	e.g.Expect(mi.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Reason", cairnv1.ReasonHookFailed))))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "web")).NotTo(BeNil(), "nothing deleted")
	e.g.Expect(e.configMap(e.ns, "web-config")).NotTo(BeNil(), "nothing deleted")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-gone")).To(BeNil(), "no post-delete hook")
}

// TestHookPostRunsAfterAHandedOverWait: when the sync hands the health check over
// (Options.HealthWait) the post-install hooks wait too; the recheck that finds the
// objects healthy runs them, and does not run the pre-install hooks again.
func TestHookPostRunsAfterAHandedOverWait(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.HealthWait = 5 * time.Second })
	repo, inst := e.hookedRepo(t)
	repo.commit("claim", map[string]string{"instances/web.yaml": inst("web", "    claim: true\n")})
	res := e.sync(repo)
	r := result(res, e.ns, "web")
	e.g.Expect(r.Action).To(BeEquivalentTo("Progressing"), "%+v", res)
	job := e.get("batch/v1", "Job", e.ns, "web-migrate")
	e.g.Expect(jobCompleted(job)).NotTo(BeZero(), "the pre-install hooks ran")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-done")).To(BeNil(), "no post-install hook before the objects are healthy")

	e.bindClaim(e.ns, "web-data")
	waitRetryDue(t, res)
	// The plan of the retry lists what it will run: the post-install hook only.
	plan := e.plan(repo)
	e.g.Expect(plan.Instances[0].Hooks).To(Equal([]reconciler.HookPlan{
		{Event: "post-install", Object: "ConfigMap/" + e.ns + "/web-done", Source: "hooked/templates/hooks.yaml"},
	}), "%+v", plan.Instances[0])
	res = e.sync(repo)
	r = result(res, e.ns, "web")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(r.Message).To(ContainSubstring("hooks run: 1 post-install"))
	e.g.Expect(r.Message).NotTo(ContainSubstring("pre-install"))
	e.g.Expect(e.get("batch/v1", "Job", e.ns, "web-migrate").GetUID()).To(Equal(job.GetUID()), "pre-install did not run again")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-done")).NotTo(BeNil(), "post-install ran once healthy")
}

// TestAChartTurnedCUEForgetsItsDeleteHooks: an instance whose chart had hooks and
// that becomes a CUE module no longer runs the chart's delete hooks when it is
// removed; the objects the chart's install hooks left still go with it.
func TestAChartTurnedCUEForgetsItsDeleteHooks(t *testing.T) {
	e := newEnv(t)
	repo, _ := e.hookedRepo(t)
	first := e.sync(repo)
	e.g.Expect(result(first, e.ns, "web").Ready).To(BeTrue(), "%+v", first)
	e.g.Expect(e.get("v1", "Secret", e.ns, "web-setup")).NotTo(BeNil(), "the pre-install hook's Secret")

	// Its first sync as a CUE module waits for a dependency that fails (the CR's
	// spec says CUE from then on); the next one succeeds.
	web := inst{name: "web", ns: e.ns, replicas: 0, configs: configs("x"), dependsOn: []string{"broken"}}
	broken := inst{name: "broken", ns: e.ns, replicas: -1}
	repo.commit("web is a CUE module now\n\ncairn-allow-prune: 100", map[string]string{
		"modules/app/app.cue": appModule, "modules/app/cue.mod/module.cue": appModuleFile,
		"instances/web.yaml": web.yaml(), "instances/broken.yaml": broken.yaml()})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeFalse(), "%+v", res)
	e.g.Expect(e.instance(e.ns, "web").Spec.Module.Local).NotTo(BeNil(), "the CR says CUE already")
	web.dependsOn = nil
	repo.commit("web on its own\n\ncairn-allow-prune: 100", map[string]string{"instances/web.yaml": web.yaml(), "instances/broken.yaml": ""})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.instance(e.ns, "web").Status.HookRecord).To(Equal("cairn-hooks-"+e.ns+".web"), "what its install hooks left is kept")

	plan := e.plan(withCommit(repo, "remove\n\ncairn-allow-prune: 100", map[string]string{"instances/web.yaml": ""}))
	e.g.Expect(plan.Instances[0].Hooks).To(BeEmpty(), "%+v", plan.Instances[0])
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Action).To(BeEquivalentTo("Deleted"), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-bye")).To(BeNil(), "the old chart's pre-delete hook does not run")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-gone")).To(BeNil(), "nor its post-delete hook")
	e.g.Expect(e.gone("v1", "Secret", e.ns, "web-setup")).To(BeTrue(), "what its install hooks left goes with the instance")
	e.g.Expect(e.get("v1", "Secret", reconciler.DefaultNamespace, "cairn-hooks-"+e.ns+".web")).To(BeNil())
}

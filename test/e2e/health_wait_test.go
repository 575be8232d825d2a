package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
)

// claimInstanceYAML declares an instance of the claim module (a PersistentVolumeClaim
// that nothing binds) with timeout; extra is appended under spec.
func claimInstanceYAML(name, ns, timeout, extra string) string {
	return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
		"\nspec:\n  module:\n    local:\n      path: ./modules/claim\n  timeout: " + timeout + "\n" + extra
}

// bindClaim marks the PersistentVolumeClaim Bound, as a provisioner would.
func (e *env) bindClaim(ns, name string) {
	e.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
	pvc.Status.Phase = corev1.ClaimBound
	e.g.Expect(e.c.Status().Update(e.ctx, pvc)).To(Succeed())
}

// waitRetryDue sleeps until the earliest retry the sync scheduled is due.
func waitRetryDue(t *testing.T, res *reconciler.SyncResult) {
	t.Helper()
	next := res.NextRetry()
	if next.IsZero() {
		t.Fatalf("no retry scheduled: %+v", res)
	}
	time.Sleep(time.Until(next) + 100*time.Millisecond)
}

// TestHealthWaitNeverHoldsTheSync: an instance whose objects stay unhealthy under a
// 10-minute timeout does not hold the sync (and so the next poll) for 10 minutes. With
// a 5 s health wait the sync ends at once with the instance Progressing (Ready
// Unknown), its neighbour Ready and its dependent Waiting; the recheck that follows
// checks the objects again without re-applying them, and once they are Current the
// instance and its dependent are Ready.
func TestHealthWaitNeverHoldsTheSync(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.HealthWait = 5 * time.Second })
	files := appRepo("", inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")},
		inst{name: "after", ns: e.ns, replicas: 0, configs: configs("y"), dependsOn: []string{"claim"}})
	files["modules/claim/claim.cue"] = claimModule
	files["instances/claim.yaml"] = claimInstanceYAML("claim", e.ns, "10m", "")
	repo := newGitRepo(t, files)

	began := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(began)).To(BeNumerically("<", 2*time.Minute), "the sync did not wait out the 10m timeout")
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	claim := result(res, e.ns, "claim")
	e.g.Expect(claim.Action).To(BeEquivalentTo("Progressing"), "%+v", res)
	e.g.Expect(claim.Message).To(ContainSubstring("PersistentVolumeClaim/" + e.ns + "/claim"))
	after := result(res, e.ns, "after")
	e.g.Expect(after.Retry).To(Equal(outcome.Waiting), "%+v", after)
	e.g.Expect(after.Message).To(ContainSubstring("is progressing"))
	e.g.Expect(e.configMap(e.ns, "after-y")).To(BeNil(), "the dependent waits for its dependency")

	mi := e.instance(e.ns, "claim")
	e.g.Expect(conditions.IsUnknown(mi, "Ready")).To(BeTrue())
	e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(cairnv1.ReasonProgressing))
	e.g.Expect(conditions.IsUnknown(mi, cairnv1.HealthyCondition)).To(BeTrue())
	e.g.Expect(conditions.IsTrue(mi, "Reconciling")).To(BeTrue())
	e.g.Expect(mi.Status.NextRetryAt).NotTo(BeNil())
	e.g.Expect(mi.Status.NextRetryAt.Time).To(BeTemporally("<=", time.Now().Add(6*time.Second)))

	// the recheck: nothing to apply, the claim is still Pending, so still Progressing
	rv := e.get("v1", "PersistentVolumeClaim", e.ns, "claim").GetResourceVersion()
	waitRetryDue(t, res)
	res = e.sync(repo)
	claim = result(res, e.ns, "claim")
	e.g.Expect(claim.Action).To(BeEquivalentTo("Progressing"), "a recheck that applies nothing does not read Ready off unchecked objects: %+v", claim)
	e.g.Expect(claim.Applied).To(Equal(0))
	e.g.Expect(e.get("v1", "PersistentVolumeClaim", e.ns, "claim").GetResourceVersion()).To(Equal(rv), "not re-applied")

	e.bindClaim(e.ns, "claim")
	waitRetryDue(t, res)
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "claim").Ready).To(BeTrue(), "%+v", res)
	mi = e.instance(e.ns, "claim")
	e.g.Expect(conditions.IsTrue(mi, cairnv1.HealthyCondition)).To(BeTrue())
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(res.Revision))
	e.g.Expect(result(res, e.ns, "after").Ready).To(BeTrue(), "the dependent follows at once: %+v", res)
	e.g.Expect(e.configMap(e.ns, "after-y")).NotTo(BeNil())
	e.g.Expect(res.NextRetry().IsZero()).To(BeTrue(), "nothing left to recheck: %+v", res)
}

// TestHealthRecheckRunsOutAtTheTimeout: rechecks of a Progressing instance are
// bounded by its timeout, counted from the apply, not restarted by each recheck.
func TestHealthRecheckRunsOutAtTheTimeout(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.HealthWait = time.Second })
	files := appRepo("")
	files["modules/claim/claim.cue"] = claimModule
	files["instances/claim.yaml"] = claimInstanceYAML("claim", e.ns, "8s", "")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "claim").Action).To(BeEquivalentTo("Progressing"), "%+v", res)
	p := e.platformCR()
	e.g.Expect(conditions.IsUnknown(p, "Ready")).To(BeTrue(), "%+v", p.Status.Conditions)
	e.g.Expect(conditions.GetMessage(p, "Ready")).To(HavePrefix("1 of 1 instances are progressing"))
	e.g.Expect(p.Status.Instances.Progressing).To(Equal(int32(1)))
	deadline := time.Now().Add(time.Minute)
	for result(res, e.ns, "claim").Action == "Progressing" && time.Now().Before(deadline) {
		waitRetryDue(t, res)
		res = e.sync(repo)
	}
	claim := result(res, e.ns, "claim")
	e.g.Expect(claim.Action).To(BeEquivalentTo("Failed"), "%+v", claim)
	e.g.Expect(claim.Reason).To(Equal(cairnv1.ReasonHealthCheckFailed))
	e.g.Expect(claim.Message).To(ContainSubstring("timed out after 8s"))
	e.g.Expect(conditions.IsFalse(e.instance(e.ns, "claim"), cairnv1.HealthyCondition)).To(BeTrue())
}

// TestRetryAfterAFailedHealthCheckChecksAgain: a retry of an instance whose health
// check timed out applies nothing (every object is unchanged) and must not read
// Ready off that: it checks the objects again and fails again while they are not
// Current.
func TestRetryAfterAFailedHealthCheckChecksAgain(t *testing.T) {
	e := newEnv(t)
	files := appRepo("")
	files["modules/claim/claim.cue"] = claimModule
	files["instances/claim.yaml"] = claimInstanceYAML("claim", e.ns, "2s", "")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "claim").Reason).To(Equal(cairnv1.ReasonHealthCheckFailed), "%+v", res)
	waitRetryDue(t, res)
	res = e.sync(repo)
	claim := result(res, e.ns, "claim")
	e.g.Expect(claim.Ready).To(BeFalse(), "%+v", claim)
	e.g.Expect(claim.Reason).To(Equal(cairnv1.ReasonHealthCheckFailed))

	e.bindClaim(e.ns, "claim")
	waitRetryDue(t, res)
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "claim").Ready).To(BeTrue(), "%+v", res)
}

// TestAHealthWaitHoldsNoApplySlot: with one instance applied at a time, two instances
// whose objects never become Current wait side by side, not one after the other.
func TestAHealthWaitHoldsNoApplySlot(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.ApplyConcurrency = 1 })
	files := appRepo("")
	files["modules/claim/claim.cue"] = claimModule
	files["instances/one.yaml"] = claimInstanceYAML("one", e.ns, "20s", "")
	files["instances/two.yaml"] = claimInstanceYAML("two", e.ns, "20s", "")
	repo := newGitRepo(t, files)
	began := time.Now()
	res := e.sync(repo)
	took := time.Since(began)
	e.g.Expect(result(res, e.ns, "one").Reason).To(Equal(cairnv1.ReasonHealthCheckFailed), "%+v", res)
	e.g.Expect(result(res, e.ns, "two").Reason).To(Equal(cairnv1.ReasonHealthCheckFailed), "%+v", res)
	e.g.Expect(took).To(BeNumerically("<", 38*time.Second), "two 20 s waits one after the other would take 40 s")
}

// holdConfigMap sets or clears a finalizer on a ConfigMap, as a controller would.
func (e *env) holdConfigMap(ns, name string, hold bool) {
	e.t.Helper()
	cm := e.configMap(ns, name)
	e.g.Expect(cm).NotTo(BeNil())
	cm.Finalizers = nil
	if hold {
		cm.Finalizers = []string{"test.cairn.dev/hold"}
	}
	e.g.Expect(e.c.Update(e.ctx, cm)).To(Succeed())
}

// TestAStuckDeletionNeverHoldsTheSync: objects that linger after their DELETE (a
// finalizer nobody removes), pruned from one instance and left behind by another
// that left Git, hold the sync for the health wait, not for the timeouts: both
// instances fail as transient (their objects and CRs stay), the instance beside them
// is applied, and once the finalizers are gone the retry finishes the prune and the
// removal.
func TestAStuckDeletionNeverHoldsTheSync(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.HealthWait = 2 * time.Second; o.DefaultTimeout = 10 * time.Minute })
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x", "y")}
	b := inst{name: "b", ns: e.ns, replicas: 0, configs: configs("z")}
	gone := inst{name: "gone", ns: e.ns, replicas: 0, configs: configs("w")}
	repo := newGitRepo(t, appRepo("", a, b, gone))
	e.syncClean(repo)
	e.holdConfigMap(e.ns, "a-y", true)
	e.holdConfigMap(e.ns, "gone-w", true)

	a.configs, b.configs = configs("x"), configs("z", "z2")
	repo.commit("drop a-y, add b-z2, remove gone", map[string]string{
		"instances/a.yaml": a.yaml(), "instances/b.yaml": b.yaml(), "instances/gone.yaml": ""})
	began := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(began)).To(BeNumerically("<", 50*time.Second), "neither the 1m instance timeout nor the 10m default was waited out")
	ra := result(res, e.ns, "a")
	e.g.Expect(ra.Reason).To(Equal(cairnv1.ReasonPruneFailed), "%+v", res)
	e.g.Expect(ra.Retry).To(Equal(outcome.Transient))
	e.g.Expect(ra.Message).To(ContainSubstring("still terminating"))
	rg := result(res, e.ns, "gone")
	e.g.Expect(rg.Reason).To(Equal(cairnv1.ReasonPruneFailed), "%+v", res)
	e.g.Expect(rg.Retry).To(Equal(outcome.Transient))
	e.g.Expect(e.instance(e.ns, "gone")).NotTo(BeNil(), "the CR stays until its objects are gone")
	e.g.Expect(result(res, e.ns, "b").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "b-z2")).NotTo(BeNil())

	e.holdConfigMap(e.ns, "a-y", false)
	e.holdConfigMap(e.ns, "gone-w", false)
	waitRetryDue(t, res)
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil())
	e.g.Expect(result(res, e.ns, "gone").Action).To(BeEquivalentTo("Deleted"), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "gone-w")).To(BeNil())
}

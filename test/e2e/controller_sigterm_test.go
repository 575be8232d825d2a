package e2e

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// objectVersions returns "uid/resourceVersion" of each named object of kind in ns.
func (e *env) objectVersions(apiVersion, kind, ns string, names ...string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, n := range names {
		if u := e.get(apiVersion, kind, ns, n); u != nil {
			out[n] = string(u.GetUID()) + "/" + u.GetResourceVersion()
		}
	}
	return out
}

// TestSIGTERMMidSyncConverges: two replicas with a 20-second Lease. SIGTERM the
// leader while its sync waits on an instance's health: it stops within seconds and
// releases the Lease, so the other replica leads in well under the lease duration
// (not once the Lease expires). The new leader goes on from there: the instance that
// was interrupted is checked again and ends Ready once its claim is bound, and what
// the first leader had applied is not applied again (same UIDs and resourceVersions).
func TestSIGTERMMidSyncConverges(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	a := inst{name: "a", ns: e.ns, configs: configs("x")}
	files := appRepo("", a)
	files["modules/claim/claim.cue"] = claimModule
	repo := newGitRepo(t, files)
	args := func() []string {
		args := e.controllerArgs(t, repo, freeLoopbackAddr(t), "0")
		for i := range args {
			switch args[i] {
			case "--leader-election-lease-duration":
				args[i+1] = "20s"
			case "--leader-election-renew-deadline":
				args[i+1] = "15s"
			}
		}
		return append(args, "--health-wait", "30s")
	}
	first := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, args()...)
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix("cairn-0_"), first.String)
	ready := func(name string) bool {
		mi := e.instance(e.ns, name)
		return mi != nil && conditions.IsTrue(mi, "Ready")
	}
	e.g.Eventually(func() bool { return ready("a") }, time.Minute, 200*time.Millisecond).Should(BeTrue(), first.String)
	second := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"}, args()...)
	e.g.Eventually(second.out.String, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring("Attempting to acquire leader lease"))

	a.configs = configs("x", "y")
	sha := repo.commit("add y and a claim", map[string]string{
		"instances/a.yaml": a.yaml(), "instances/claim.yaml": claimInstanceYAML("claim", e.ns, "10m", ""),
	})
	e.g.Eventually(first.out.String, 30*time.Second, 50*time.Millisecond).Should(ContainSubstring("wait "+e.ns+"/claim"),
		"the leader's sync waits on the claim")
	e.g.Eventually(func() string { return e.instance(e.ns, "a").Status.LastAppliedRevision }, 10*time.Second, 50*time.Millisecond).
		Should(Equal(sha), "a, beside it, is done")
	applied := e.objectVersions("v1", "ConfigMap", e.ns, "a-x", "a-y")
	claimBefore := e.objectVersions("v1", "PersistentVolumeClaim", e.ns, "claim")
	e.g.Expect(applied).To(HaveLen(2))
	e.g.Expect(claimBefore).To(HaveLen(1))

	took, err := first.stop(15 * time.Second)
	e.g.Expect(err).NotTo(HaveOccurred(), "a clean exit on SIGTERM:\n%s", first.String())
	stopped := time.Now()
	e.g.Eventually(e.leaseHolder, 20*time.Second, 50*time.Millisecond).Should(HavePrefix("cairn-1_"), second.String)
	takeover := time.Since(stopped)
	t.Logf("the leader exited %s after SIGTERM; the other replica led %s after that (lease duration 20s)",
		took.Round(10*time.Millisecond), takeover.Round(10*time.Millisecond))
	e.g.Expect(took).To(BeNumerically("<", 10*time.Second))
	e.g.Expect(takeover).To(BeNumerically("<", 5*time.Second), "the Lease was released, not left to expire")
	e.g.Expect(first.out.String()).To(ContainSubstring("sync of revision " + sha + " interrupted"))

	e.g.Eventually(second.out.String, 30*time.Second, 50*time.Millisecond).Should(ContainSubstring("wait "+e.ns+"/claim"),
		"the new leader checks the interrupted instance again")
	e.bindClaim(e.ns, "claim")
	e.g.Eventually(func() bool { return ready("claim") }, time.Minute, 200*time.Millisecond).Should(BeTrue(), second.String)
	for _, name := range []string{"a", "claim"} {
		mi := e.instance(e.ns, name)
		e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue(), name)
		e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(sha), name)
	}
	e.g.Expect(e.objectVersions("v1", "ConfigMap", e.ns, "a-x", "a-y")).To(Equal(applied), "a's objects are not applied twice")
	claimAfter := e.objectVersions("v1", "PersistentVolumeClaim", e.ns, "claim")
	e.g.Expect(claimAfter).To(HaveLen(1))
	e.g.Expect(claimAfter["claim"][:36]).To(Equal(claimBefore["claim"][:36]), "the claim is not re-created")
	pvc := e.get("v1", "PersistentVolumeClaim", e.ns, "claim")
	for _, f := range pvc.GetManagedFields() {
		if f.Manager == cairnv1.FieldManager && f.Subresource == "" {
			e.g.Expect(f.Time.Time).To(BeTemporally("<", stopped), "cairn's apply of the claim is the first leader's, not repeated")
		}
	}
	e.g.Eventually(func() string { return e.platformCR().Status.LastSyncedRevision }, 30*time.Second, 200*time.Millisecond).Should(Equal(sha))
}

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestSIGTERMMidSyncIsInterrupted: SIGTERM while `cairn sync --once` waits on an
// instance that never becomes healthy (timeout 2m) ends the process within seconds;
// the instance reads Interrupted (transient: retried, not Stalled), reported once,
// and the Platform is finished: Interrupted, neither Stalled nor Reconciling, its
// last synced revision not moved to the unfinished one.
func TestSIGTERMMidSyncIsInterrupted(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	st := e.startStuckSync(t)
	e.g.Eventually(st.proc.out.String, 30*time.Second, 50*time.Millisecond).Should(ContainSubstring("wait "+e.ns+"/stuck"),
		"the sync waits on the Deployment")

	took, err := st.proc.stop(10 * time.Second)
	out := st.proc.out.String()
	t.Logf("exited %s after SIGTERM (%v):\n%s", took.Round(time.Millisecond), err, indent(out))
	e.g.Expect(took).To(BeNumerically("<", 5*time.Second))
	e.g.Expect(st.proc.cmd.ProcessState.ExitCode()).To(Equal(1))
	e.g.Expect(out).To(ContainSubstring("Error: sync interrupted: terminated signal received"))
	e.g.Expect(out).To(ContainSubstring("sync of revision " + st.sha + " interrupted\n"))
	e.g.Expect(out).To(MatchRegexp(e.ns + `/stuck\s+Failed\s+the sync of ` + e.ns + `/stuck was interrupted \(terminated signal received\)`))
	e.g.Expect(strings.Count(out, `msg="instance failed"`)).To(Equal(1), "reported once")
	// No cascade of cancelled calls in cairn's messages. client-go logs a read cut
	// by the cancelled context on its own ("Unexpected error when reading response
	// body"), when the signal lands while a health poll's answer is on the wire.
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "Unexpected error when reading response body") {
			e.g.Expect(line).NotTo(ContainSubstring("context canceled"), "no cascade of cancelled calls")
		}
	}
	e.g.Expect(out).NotTo(ContainSubstring("failed to patch status"))

	mi := e.instance(e.ns, "stuck")
	ready := conditions.Get(mi, "Ready")
	e.g.Expect(ready).NotTo(BeNil())
	e.g.Expect(ready.Status).To(BeEquivalentTo("False"))
	e.g.Expect(ready.Reason).To(Equal(cairnv1.ReasonInterrupted))
	e.g.Expect(conditions.Has(mi, "Stalled")).To(BeFalse(), "transient, not Stalled")
	e.g.Expect(conditions.GetReason(mi, "Reconciling")).To(Equal(cairnv1.ReasonInterrupted), "retried")
	e.g.Expect(conditions.IsUnknown(mi, cairnv1.HealthyCondition)).To(BeTrue(),
		"an interrupted wait says nothing of health: Unknown, so the next attempt checks every object")
	e.g.Expect(mi.Status.History).NotTo(BeEmpty())
	e.g.Expect(mi.Status.History[0].Reason).To(Equal(cairnv1.ReasonInterrupted))
	e.g.Expect(mi.Status.NextRetryAt).NotTo(BeNil())

	p := e.platformCR()
	e.g.Expect(conditions.GetReason(p, "Ready")).To(Equal(cairnv1.ReasonInterrupted), "%+v", p.Status.Conditions)
	e.g.Expect(conditions.IsFalse(p, "Ready")).To(BeTrue())
	e.g.Expect(conditions.Has(p, "Stalled")).To(BeFalse())
	e.g.Expect(conditions.Has(p, "Reconciling")).To(BeFalse(), "the Platform is not left Reconciling")
	e.g.Expect(p.Status.LastAttemptedRevision).To(Equal(st.sha))
	e.g.Expect(p.Status.LastSyncedRevision).To(BeEmpty(), "an interrupted sync does not count as synced")
	e.g.Expect(e.syncLease().Spec.HolderIdentity).To(HaveValue(BeEmpty()), "the Lease is freed at exit")
}

// TestLostLeaseStopsTheSync: another holder takes the Lease while a sync waits on
// health; the sync cannot renew it, so it stops within the renew deadline rather
// than go on unguarded, recording the instance as Interrupted, and leaves the Lease
// to its new holder.
func TestLostLeaseStopsTheSync(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	st := e.startStuckSync(t)
	e.g.Eventually(st.proc.out.String, 30*time.Second, 50*time.Millisecond).Should(ContainSubstring("wait " + e.ns + "/stuck"))

	l := e.syncLease()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = ptr.To("thief_0"), &now, ptr.To[int32](3600)
	e.g.Expect(e.c.Update(e.ctx, l)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), l) }) // the thief never lets go
	begin := time.Now()
	select {
	case <-st.proc.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the sync went on for 30s without the Lease:\n%s", st.proc)
	}
	out := st.proc.out.String()
	t.Logf("stopped %s after losing the Lease:\n%s", time.Since(begin).Round(time.Millisecond), indent(out))
	e.g.Expect(time.Since(begin)).To(BeNumerically("<", 15*time.Second), "within the renew deadline (10s)")
	e.g.Expect(st.proc.cmd.ProcessState.ExitCode()).To(Equal(1))
	e.g.Expect(out).To(ContainSubstring("Error: lost the sync Lease: the sync stopped"))
	e.g.Expect(out).NotTo(ContainSubstring("released the sync Lease"), "it was not its to release")
	e.g.Expect(out).To(ContainSubstring(e.ns + "/stuck was interrupted (lost the sync Lease"))
	e.g.Expect(conditions.GetReason(e.instance(e.ns, "stuck"), "Ready")).To(Equal(cairnv1.ReasonInterrupted))
	e.g.Expect(e.syncLease().Spec.HolderIdentity).To(HaveValue(Equal("thief_0")), "the new holder keeps it")
}

// TestSyncAfterSIGTERMResumesTheInterruptedInstance: the interruption's message says
// "the next sync resumes it", and the next `cairn sync --once` at the same commit does:
// it takes up the instance at once (no "not retried before"), applies and waits again.
func TestSyncAfterSIGTERMResumesTheInterruptedInstance(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	st := e.startStuckSync(t)
	e.g.Eventually(st.proc.out.String, 30*time.Second, 50*time.Millisecond).Should(ContainSubstring("wait "+e.ns+"/stuck"),
		"the sync waits on the Deployment")
	_, _ = st.proc.stop(10 * time.Second)
	e.g.Expect(st.proc.out.String()).To(ContainSubstring("the next sync resumes it"))
	e.g.Expect(conditions.GetReason(e.instance(e.ns, "stuck"), "Ready")).To(Equal(cairnv1.ReasonInterrupted))

	next := startCairnProcess(t, st.bin, "sync", "--once", "--health-wait", "1s", "--repo", st.repo.url(),
		"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", t.TempDir())
	select {
	case <-next.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("the next sync did not end:\n%s", next.out)
	}
	out := next.out.String()
	t.Logf("the next sync:\n%s", indent(out))
	e.g.Expect(out).NotTo(ContainSubstring("not retried before"))
	e.g.Expect(out).To(ContainSubstring("resuming an interrupted sync"))
	e.g.Expect(out).To(ContainSubstring("wait "+e.ns+"/stuck"), "it waits on the instance again")
	e.g.Expect(next.cmd.ProcessState.ExitCode()).NotTo(Equal(2), "no instance is failed for not being retried")
	e.g.Expect(conditions.GetReason(e.instance(e.ns, "stuck"), "Ready")).NotTo(Equal(cairnv1.ReasonInterrupted))
}

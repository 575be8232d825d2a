package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

const unboundClaimModule = `package claim

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

// TestSyncLoopRechecksAProgressingInstanceOnItsOwn: under `cairn sync --interval 10m
// --health-wait 1s`, an instance whose claim is not bound is reported Progressing
// and the loop goes on; once the claim is bound, the loop's own recheck (seconds
// later, not at the next 10-minute poll) makes the instance Ready.
func TestSyncLoopRechecksAProgressingInstanceOnItsOwn(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	files := cliRepo(map[string]string{
		"web":   cliInstance(cc.ns, "web", "app", "{}"),
		"claim": cliInstance(cc.ns, "claim", "claim", "{}"),
	})
	files["modules/claim/main.cue"] = unboundClaimModule
	dir := writeRepoDir(t, files)

	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs([]string{"sync", "--repo", dir, "--interval", "10m", "--health-wait", "1s", "--drift-interval", "0", "-q",
		"--kubeconfig", cc.kubeconfig, "--cache-dir", t.TempDir()})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	claim := func() *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{}
		if err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: cc.ns, Name: "claim"}, mi); err != nil {
			return nil
		}
		return mi
	}
	g.Eventually(func() string {
		if mi := claim(); mi != nil {
			return conditions.GetReason(mi, "Ready")
		}
		return ""
	}, time.Minute, 200*time.Millisecond).
		Should(Equal(cairnv1.ReasonProgressing))
	g.Expect(conditions.IsUnknown(claim(), "Ready")).To(BeTrue())

	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Namespace: cc.ns, Name: "claim"}, pvc)).To(Succeed())
	pvc.Status.Phase = corev1.ClaimBound
	g.Expect(cc.c.Status().Update(context.Background(), pvc)).To(Succeed())
	g.Eventually(func() bool { mi := claim(); return mi != nil && conditions.IsTrue(mi, "Ready") }, time.Minute, 200*time.Millisecond).
		Should(BeTrue(), func() string {
			m := claim()
			return fmt.Sprintf("the loop rechecks on its own schedule: %+v\n%s\n%s", m.Status, out.String(), errOut.String())
		})
	cancel()
	g.Expect(<-done).To(Succeed())
	done <- nil
	g.Expect(out.String()).To(ContainSubstring(cc.ns + "/claim"))
	g.Expect(out.String()).To(ContainSubstring("Progressing"))
}

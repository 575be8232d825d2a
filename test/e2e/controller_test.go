package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/lease"
)

// leaseHolder is the holder of the sync Lease ("" when none or absent).
func (e *env) leaseHolder() string {
	l := &coordinationv1.Lease{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: lease.Name}, l); err != nil ||
		l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// controllerArgs runs `cairn controller` against repo with short leader-election
// timings, its probes on probe, as the admin.
func (e *env) controllerArgs(t *testing.T, repo *gitRepo, probe, metrics string) []string {
	return e.controllerArgsAs(t, repo, e.cluster.Kubeconfig, probe, metrics)
}

// controllerArgsAs is controllerArgs as the identity of kubeconfig.
func (e *env) controllerArgsAs(t *testing.T, repo *gitRepo, kubeconfig, probe, metrics string) []string {
	return []string{"controller", "--repo", repo.url(), "--interval", "1s", "--drift-interval", "0",
		"--leader-elect", "--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
		"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms",
		"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}
}

// TestControllerReplicas: of two `cairn controller` replicas, running with the
// installed ServiceAccount's token, one leads (the Lease holder names its pod) and
// syncs; the other waits. SIGKILL the leader: the other takes the Lease once it expires
// and applies the next commit. A `kubectl edit` of a ModuleInstance is reverted within
// seconds, not at the next poll. So too with one shard, where the instance reconciles
// run on the queue of the replica holding the shard, which counts their outcomes in
// the metrics (the leader only reads them from the CRs); there the edit comes while
// the new leader's sync may still wait to read the replica's attempt from the CR, and
// must not hide it.
func TestControllerReplicas(t *testing.T) {
	t.Run("the leader reconciles", func(t *testing.T) { controllerReplicas(t, "--shards", "0") })
	t.Run("one shard", func(t *testing.T) { controllerReplicas(t, "--shards", "1") })
}

func controllerReplicas(t *testing.T, extra ...string) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.grantNamespace(e.ns, "*")
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), extra: "  serviceAccountName: deployer\n"}
	repo := newGitRepo(t, appRepo("", a))
	e.installController(bin, repo)
	kubeconfig, _ := e.controllerIdentity()

	probe0, metrics0 := freeLoopbackAddr(t), freeLoopbackAddr(t)
	first := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"},
		append(append(e.controllerArgsAs(t, repo, kubeconfig, probe0, metrics0), "--log-format", "json"), extra...)...)
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix("cairn-0_"), first.String)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-x") != nil }, time.Minute, 200*time.Millisecond).
		Should(BeTrue(), first.String)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + probe0 + path)
		e.g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		e.g.Expect(resp.StatusCode).To(Equal(http.StatusOK), path)
	}

	e.g.Eventually(func() string { return httpGet(t, "http://"+metrics0+"/metrics") }, 10*time.Second, 200*time.Millisecond).
		Should(ContainSubstring(`cairn_instances{state="ready"} 1`), "the sync has finished")
	scrape := httpGet(t, "http://"+metrics0+"/metrics")
	e.g.Expect(scrape).To(ContainSubstring(`cairn_instance_results_total{action="Created",reason="Succeeded"} 1`))
	e.g.Expect(scrape).To(ContainSubstring(`cairn_sync_duration_seconds_count{result="succeeded"}`))
	e.g.Expect(scrape).To(ContainSubstring("controller_runtime_"), "controller-runtime's own metrics too")
	e.expectObservedInstance(t, scrape, first.out.String(), "a")

	second := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"},
		append(e.controllerArgsAs(t, repo, kubeconfig, freeLoopbackAddr(t), "0"), extra...)...)
	e.g.Consistently(e.leaseHolder, 3*time.Second, 200*time.Millisecond).Should(HavePrefix("cairn-0_"), "one leader at a time")

	x := e.configMap(e.ns, "a-x")
	e.g.Expect(first.cmd.Process.Kill()).To(Succeed())
	<-first.done
	killed := time.Now()
	a.configs = configs("x", "y")
	sha := repo.commit("add y", map[string]string{"instances/a.yaml": a.yaml()})
	e.g.Eventually(e.leaseHolder, 30*time.Second, 200*time.Millisecond).Should(HavePrefix("cairn-1_"), second.String)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-y") != nil }, 30*time.Second, 200*time.Millisecond).
		Should(BeTrue(), second.String)
	t.Logf("the commit after the leader's SIGKILL was applied by the other replica %s later",
		time.Since(killed).Round(100*time.Millisecond))
	e.g.Expect(strings.Count(second.out.String(), "leading: polling")).To(Equal(1))
	e.g.Eventually(func() string { return e.instance(e.ns, "a").Status.LastAppliedRevision }, 10*time.Second, 100*time.Millisecond).Should(Equal(sha))
	var attempts []string
	for _, h := range e.instance(e.ns, "a").Status.History {
		attempts = append(attempts, h.Revision+" "+h.Result)
	}
	e.g.Expect(attempts).To(HaveLen(2), "each commit applied once, by one replica: %v", attempts)
	e.g.Expect(attempts[0]).To(Equal(sha + " Ready"))
	e.g.Expect(e.configMap(e.ns, "a-x").UID).To(Equal(x.UID), "nothing lost or re-created in the failover")

	mi := e.instance(e.ns, "a")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"timeout":"7m","suspend":true}}`))
	e.g.Expect(e.c.Patch(e.ctx, mi, patch, client.FieldOwner("kubectl-edit"))).To(Succeed())
	edited := time.Now()
	e.g.Eventually(func() bool {
		mi := e.instance(e.ns, "a")
		return mi.Spec.Timeout.Duration == time.Minute && !mi.Spec.Suspend
	}, 5*time.Second, 100*time.Millisecond).Should(BeTrue(), second.String)
	t.Logf("a kubectl edit was reverted in %s", time.Since(edited).Round(10*time.Millisecond))

	p := e.platformCR()
	before := p.Spec.Prune.MaxDeletions // as Git says (nil: the default)
	e.g.Expect(e.c.Patch(e.ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"prune":{"maxDeletions":9999}}}`)),
		client.FieldOwner("kubectl-edit"))).To(Succeed())
	e.g.Eventually(func() *int32 { return e.platformCR().Spec.Prune.MaxDeletions }, 5*time.Second, 100*time.Millisecond).
		Should(Equal(before), "an edit of the Platform is reverted too")
}

// httpGet returns the body of a GET of url, which must answer 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}

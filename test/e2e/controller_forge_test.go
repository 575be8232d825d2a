package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestAPullRequestToAReplicaThatDoesNotLeadIsPlannedByTheLeader: two controller
// replicas on a real Gitea, whose webhook reaches only the replica that does not
// lead (as a Service may route it). A pull request opened there is passed on and
// planned by the leader: the plan comment and the cairn/plan status appear, posted
// once; a push to main that reaches the same replica is synced by the leader.
func TestAPullRequestToAReplicaThatDoesNotLeadIsPlannedByTheLeader(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	a := inst{name: "a", ns: e.ns, configs: configs("x")}
	f, first := newForgeEnv(t, e, appRepo("", a))
	dir := t.TempDir()
	tokenFile, secretFile := filepath.Join(dir, "token"), filepath.Join(dir, "webhook-secret")
	e.g.Expect(os.WriteFile(tokenFile, []byte(f.gitea.Token+"\n"), 0o600)).To(Succeed())
	e.g.Expect(os.WriteFile(secretFile, []byte(f.secret+"\n"), 0o600)).To(Succeed())
	f.cache = filepath.Join(dir, "leader-cache")
	controller := func(cache, hook string) []string {
		return []string{"controller", "--repo", f.gitURL(), "--interval", "10m", "--drift-interval", "0",
			"--leader-elect", "--metrics-bind-address", "0", "--health-probe-bind-address", freeLoopbackAddr(t),
			"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms",
			"--forge", "gitea", "--forge-url", f.gitea.URL, "--forge-token-file", tokenFile,
			"--webhook-bind-address", hook, "--webhook-secret-file", secretFile,
			"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", cache}
	}
	leader := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, controller(f.cache, freeLoopbackAddr(t))...)
	f.cairn = leader
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix("cairn-0_"), leader.String)
	f.waitInstance("a", first, time.Now(), 90*time.Second)
	hook := freeLoopbackAddr(t)
	other := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"}, controller(filepath.Join(dir, "other-cache"), hook)...)
	other.waitListening(t, "http://"+hook+"/hooks/gitea")
	e.g.Expect(f.gitea.AddWebhook(f.ctx, f.repo, "http://"+hook+"/hooks/gitea", f.secret, "push", "pull_request")).To(Succeed())

	a.configs = configs("x", "y")
	head := f.putFile("add-y", "main", "instances/a.yaml", a.yaml())
	number, err := f.gitea.CreatePullRequest(f.ctx, f.repo, "add-y", "main", "add y")
	e.g.Expect(err).NotTo(HaveOccurred())
	opened := time.Now()
	c := f.waitPlanComment(number, head)
	t.Logf("a pull request whose webhook reached the replica that does not lead was planned by the leader %s later",
		time.Since(opened).Round(10*time.Millisecond))
	e.g.Expect(c.Body).To(ContainSubstring(f.planRow("a", "Update", 1, 0, 0, 2)))
	plan := f.waitState(head, "cairn/plan", "success")
	e.g.Expect(plan.Description).To(Equal("1 to create, 0 to configure, 0 to prune"))
	f.waitKeptPlan(number, head)
	e.g.Expect(f.planComments(number)).To(HaveLen(1), "planned once")
	e.g.Expect(other.out.String()).To(ContainSubstring("passed pull requests on to the leader"))
	e.g.Expect(leader.out.String()).To(ContainSubstring("planning pull requests passed on by another replica"))
	e.g.Expect(e.platformCR().Annotations).NotTo(HaveKey(HavePrefix("plan.cairn.dev/")), "the request is removed once queued")
	e.g.Expect(f.configMap(e.ns, "a-y")).To(BeNil(), "a plan changes nothing in the cluster")

	sha := f.push("add z", map[string]string{"instances/a.yaml": inst{name: "a", ns: e.ns, configs: configs("x", "z")}.yaml()})
	f.waitInstance("a", sha, time.Now(), 30*time.Second)
	e.g.Expect(f.configMap(e.ns, "a-z")).NotTo(BeNil())
	e.g.Expect(other.out.String()).To(ContainSubstring("passed a push on to the leader"))
}

// TestShardedControllersPostEveryInstancesCommitStatus: under two `cairn controller
// --shards 2` processes, the instances are reconciled by the replicas that hold
// their shards, and the leader still posts each instance's commit status and the
// revision's (read from the CRs as they attempt their input); nothing is left
// pending, and a failing instance's status says why.
func TestShardedControllersPostEveryInstancesCommitStatus(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	insts := []inst{{name: "a", ns: e.ns, configs: configs("x")}, {name: "b", ns: e.ns, configs: configs("x")},
		{name: "c", ns: e.ns, configs: configs("x")}}
	f, first := newForgeEnv(t, e, appRepo("", insts...))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	e.g.Expect(os.WriteFile(tokenFile, []byte(f.gitea.Token+"\n"), 0o600)).To(Succeed())
	controller := func(cache string) []string {
		return []string{"controller", "--repo", f.gitURL(), "--interval", "1s", "--drift-interval", "0", "--shards", "2",
			"--leader-elect", "--metrics-bind-address", "0", "--health-probe-bind-address", freeLoopbackAddr(t),
			"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms",
			"--forge", "gitea", "--forge-url", f.gitea.URL, "--forge-token-file", tokenFile,
			"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", cache}
	}
	f.cache = filepath.Join(dir, "cache-0")
	f.cairn = startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, controller(f.cache)...)
	startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"}, controller(filepath.Join(dir, "cache-1"))...)
	for _, in := range insts {
		f.waitInstance(in.name, first, time.Now(), 2*time.Minute)
		f.waitState(first, "cairn/"+e.ns+"/"+in.name, "success")
	}
	f.waitState(first, "cairn/sync", "success")

	bad := insts[1]
	bad.replicas = -1 // the module refuses it: the render fails
	sha := f.push("b breaks", map[string]string{"instances/b.yaml": bad.yaml()})
	failed := f.waitState(sha, "cairn/"+e.ns+"/b", "failure")
	e.g.Expect(failed.Description).NotTo(BeEmpty())
	f.waitState(sha, "cairn/sync", "failure")
	f.expectNothingPending()
}

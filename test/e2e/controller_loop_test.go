package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// slowController is controllerArgs with a 10-minute poll: whatever syncs within a
// test's seconds was not the poll.
func (e *env) slowController(t *testing.T, repo *gitRepo, extra ...string) []string {
	return e.slowControllerAs(t, repo, e.cluster.Kubeconfig, extra...)
}

// slowControllerAs is slowController as the identity of kubeconfig.
func (e *env) slowControllerAs(t *testing.T, repo *gitRepo, kubeconfig string, extra ...string) []string {
	args := e.controllerArgsAs(t, repo, kubeconfig, freeLoopbackAddr(t), "0")
	for i, a := range args {
		if a == "--interval" {
			args[i+1] = "10m"
		}
	}
	return append(args, extra...)
}

// settled waits until the leader p has started its watches (their first events sync
// the head once more) and has not synced for 2 seconds.
func (e *env) settled(p *cairnProcess) {
	e.t.Helper()
	e.g.Eventually(func() int { return strings.Count(p.out.String(), `msg="Starting workers"`) }, time.Minute, 200*time.Millisecond).
		Should(BeNumerically(">=", 3), p.String)
	e.g.Eventually(func() int { return strings.Count(p.out.String(), "synced revision") }, time.Minute, 200*time.Millisecond).
		Should(BeNumerically(">=", 1), p.String)
	e.g.Eventually(func() bool {
		before := strings.Count(p.out.String(), "synced revision")
		time.Sleep(2 * time.Second)
		return strings.Count(p.out.String(), "synced revision") == before
	}, time.Minute).Should(BeTrue(), p.String)
}

// TestReconcileSourceSyncsBeforeTheInterval: under a controller that polls every 10
// minutes, `cairn reconcile source` makes the leader fetch and sync a new commit
// within seconds, and the Platform's status.lastHandledReconcileAt records the
// request.
func TestReconcileSourceSyncsBeforeTheInterval(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	a := inst{name: "a", ns: e.ns, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, e.slowController(t, repo)...)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-x") != nil }, time.Minute, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	e.settled(ctrl)

	a.configs = configs("x", "y")
	sha := repo.commit("add y", map[string]string{"instances/a.yaml": a.yaml()})
	e.g.Consistently(func() bool { return e.configMap(e.ns, "a-y") != nil }, 2*time.Second, 200*time.Millisecond).
		Should(BeFalse(), "the next poll is 10 minutes away")
	out, err := exec.Command(bin, "reconcile", "source", "--kubeconfig", e.cluster.Kubeconfig).CombinedOutput()
	e.g.Expect(err).NotTo(HaveOccurred(), string(out))
	requested := time.Now()
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-y") != nil }, 15*time.Second, 100*time.Millisecond).
		Should(BeTrue(), ctrl.String)
	t.Logf("cairn reconcile source: the new commit was applied %s later", time.Since(requested).Round(10*time.Millisecond))
	e.g.Eventually(func() string {
		p := e.platformCR()
		if p.Status.LastHandledReconcileAt != p.Annotations[cairnv1.ReconcileRequestAnnotation] {
			return "pending"
		}
		return p.Status.LastSyncedRevision
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(sha))
	status, err := exec.Command(bin, "status", "--kubeconfig", e.cluster.Kubeconfig).CombinedOutput()
	e.g.Expect(err).NotTo(HaveOccurred(), string(status))
	e.g.Expect(string(status)).To(MatchRegexp(`(?m)^source: .* at ` + sha[:12] + `; reconcile requested at \S+: handled$`))
}

// TestAWebhookToAReplicaThatDoesNotLeadIsSyncedByTheLeader: both replicas serve
// --webhook-bind-address (the Service picks either). A signed push delivered to the
// replica that does not lead is passed on to the leader, which syncs the commit
// within seconds; one delivered to the leader is synced at once; a delivery with a
// wrong signature is refused and syncs nothing. Both run with the installed
// ServiceAccount's token.
func TestAWebhookToAReplicaThatDoesNotLeadIsSyncedByTheLeader(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.grantNamespace(e.ns, "*")
	a := inst{name: "a", ns: e.ns, configs: configs("x"), extra: "  serviceAccountName: deployer\n"}
	repo := newGitRepo(t, appRepo("", a))
	e.installController(bin, repo)
	kubeconfig, _ := e.controllerIdentity() // the installed RBAC lets a replica pass a push on
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	e.g.Expect(os.WriteFile(secretFile, []byte("hook-s3cret\n"), 0o600)).To(Succeed())
	hook0, hook1 := freeLoopbackAddr(t), freeLoopbackAddr(t)
	leader := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"},
		e.slowControllerAs(t, repo, kubeconfig, "--webhook-bind-address", hook0, "--webhook-secret-file", secretFile)...)
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix("cairn-0_"), leader.String)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-x") != nil }, time.Minute, 200*time.Millisecond).Should(BeTrue(), leader.String)
	e.settled(leader)
	other := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"},
		e.slowControllerAs(t, repo, kubeconfig, "--webhook-bind-address", hook1, "--webhook-secret-file", secretFile)...)
	other.waitListening(t, "http://"+hook1+"/hooks/gitea")

	body, err := os.ReadFile(filepath.Join("..", "..", "gitsource", "forge", "gitea", "testdata", "gitea_push.json"))
	e.g.Expect(err).NotTo(HaveOccurred())
	push := func(addr, key string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/gitea", bytes.NewReader(body))
		req.Header.Set("X-Gitea-Event", "push")
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write(body)
		req.Header.Set("X-Gitea-Signature", hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		e.g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}

	a.configs = configs("x", "y")
	repo.commit("add y", map[string]string{"instances/a.yaml": a.yaml()})
	e.g.Expect(push(hook1, "wrong-key")).To(Equal(http.StatusUnauthorized))
	e.g.Consistently(func() bool { return e.configMap(e.ns, "a-y") != nil }, 2*time.Second, 200*time.Millisecond).
		Should(BeFalse(), "a delivery with a wrong signature syncs nothing")
	e.g.Expect(push(hook1, "hook-s3cret")).To(Equal(http.StatusAccepted))
	pushed := time.Now()
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-y") != nil }, 15*time.Second, 100*time.Millisecond).
		Should(BeTrue(), func() string { return leader.String() + "\n---\n" + other.String() })
	t.Logf("a push to the replica that does not lead was applied by the leader %s later", time.Since(pushed).Round(10*time.Millisecond))
	e.g.Expect(other.out.String()).To(ContainSubstring("passed a push on to the leader"))
	e.g.Expect(e.leaseHolder()).To(HavePrefix("cairn-0_"), "the leader synced it")

	a.configs = configs("x", "y", "z")
	repo.commit("add z", map[string]string{"instances/a.yaml": a.yaml()})
	e.g.Expect(push(hook0, "hook-s3cret")).To(Equal(http.StatusAccepted))
	pushed = time.Now()
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-z") != nil }, 15*time.Second, 100*time.Millisecond).
		Should(BeTrue(), leader.String)
	t.Logf("a push to the leader was applied %s later", time.Since(pushed).Round(10*time.Millisecond))
	e.g.Expect(leader.out.String()).NotTo(ContainSubstring("passed a push on"), "the leader syncs its own pushes at once")
}

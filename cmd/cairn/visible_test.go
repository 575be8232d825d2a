package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/test/harness"
)

func TestStatusMarksSuspendedInstances(t *testing.T) {
	g := NewWithT(t)
	paused, running := cairnv1.ModuleInstance{}, cairnv1.ModuleInstance{}
	paused.Namespace, paused.Name, paused.Spec.Suspend = "team-a", "paused", true
	conditions.MarkUnknown(&paused, "Ready", cairnv1.ReasonSuspended, "suspended")
	running.Namespace, running.Name = "team-a", "running"
	conditions.MarkTrue(&running, "Ready", cairnv1.ReasonSucceeded, "ok")

	rows := statusRows([]cairnv1.ModuleInstance{paused, running})
	g.Expect(rows[0].Suspended).To(BeTrue())
	g.Expect(rows[0].Ready).To(Equal("Unknown"))
	g.Expect(rows[0].Reason).To(Equal(cairnv1.ReasonSuspended))
	g.Expect(rows[1].Suspended).To(BeFalse())
	var out bytes.Buffer
	g.Expect(printStatusTable(&out, rows)).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`(?m)^NAMESPACE .* SUSPENDED +HELD +MESSAGE$`))
	g.Expect(out.String()).To(MatchRegexp(`(?m)^team-a +paused +Unknown +Suspended .* SUSPENDED +- +suspended$`))
	g.Expect(out.String()).To(MatchRegexp(`(?m)^team-a +running +True +Succeeded .* - +- +ok$`))
}

// TestStatusMarksHeldInstances: a held instance shows the digest it is held at in
// the HELD column (shortened) and in -o json with since when.
func TestStatusMarksHeldInstances(t *testing.T) {
	g := NewWithT(t)
	held := cairnv1.ModuleInstance{}
	held.Namespace, held.Name = "team-a", "web"
	conditions.MarkTrue(&held, "Ready", cairnv1.ReasonSucceeded, "ok")
	held.Status.Held = &cairnv1.HeldRender{Revision: "0123456789abcdef", RenderDigest: "hmac-sha256:abcdef0123456789ff"}
	rows := statusRows([]cairnv1.ModuleInstance{held})
	g.Expect(rows[0].Held).To(Equal("hmac-sha256:abcdef0123456789ff"))
	var out bytes.Buffer
	g.Expect(printStatusTable(&out, rows)).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`(?m)^team-a +web +True +Succeeded .* - +abcdef012345 +ok$`))
}

func TestSyncOutputShowsWarnings(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	loop.PrintResult(&out, &reconciler.SyncResult{Revision: "abc", Instances: []reconciler.InstanceResult{{
		Namespace: "team-a", Name: "web", Action: "Updated", Ready: true, Message: "1 objects applied",
		Warnings: []string{"module x requires catalog y v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"},
	}}})
	g.Expect(out.String()).To(MatchRegexp(`(?m)^ +warning: module x requires catalog y v0.2.0, newer than the pinned v0.1.0`))
}

// jsonLines parses every line of s as a JSON object.
func jsonLines(g *WithT, s string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		m := map[string]any{}
		g.Expect(json.Unmarshal([]byte(line), &m)).To(Succeed(), "not a JSON line: %q", line)
		out = append(out, m)
	}
	return out
}

// TestSyncLogsJSONLinesWithInstanceAndRevision: with --log-format json every line on
// stderr is a JSON object, progress included; each instance's progress and outcome
// are logged with its instance and revision keys, a failure at error level with its reason.
func TestSyncLogsJSONLinesWithInstanceAndRevision(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := webAndBrokenRepo(t, cc.ns)
	r := cc.run(t, "sync", "--once", "--repo", dir, "--log-format", "json", "--log-level", "info")
	g.Expect(r.code).To(Equal(2), r.stdout+r.stderr)
	lines := jsonLines(g, r.stderr)
	g.Expect(lines).To(ContainElement(SatisfyAll(HaveKeyWithValue("msg", "progress"), HaveKeyWithValue("step", "apply "+cc.ns+"/web: 2 objects"),
		HaveKeyWithValue("instance", cc.ns+"/web"), HaveKeyWithValue("revision", MatchRegexp(`^dir:[0-9a-f]{12}$`)))))
	g.Expect(lines).To(ContainElement(SatisfyAll(HaveKeyWithValue("msg", "instance synced"), HaveKeyWithValue("level", "INFO"),
		HaveKeyWithValue("instance", cc.ns+"/web"), HaveKeyWithValue("revision", MatchRegexp(`^dir:[0-9a-f]{12}$`)),
		HaveKeyWithValue("action", "Created"))))
	g.Expect(lines).To(ContainElement(SatisfyAll(HaveKeyWithValue("msg", "instance failed"), HaveKeyWithValue("level", "ERROR"),
		HaveKeyWithValue("instance", cc.ns+"/broken"), HaveKeyWithValue("reason", cairnv1.ReasonRenderFailed),
		HaveKeyWithValue("err", ContainSubstring("modules/broken/main.cue:5:")))))

	// A change to the broken module (still broken) renders it again: a failed
	// instance whose input did not change keeps its retry schedule.
	g.Expect(os.WriteFile(filepath.Join(dir, "modules/broken/main.cue"), []byte(brokenModule+"// still broken\n"), 0o644)).To(Succeed())
	r = cc.run(t, "sync", "--once", "--repo", dir, "--log-format", "json", "--log-level", "error")
	g.Expect(r.stderr).To(ContainSubstring("instance failed"))
	for _, l := range jsonLines(g, r.stderr) {
		g.Expect(l).To(HaveKeyWithValue("level", "ERROR"), "--log-level error logs errors only")
	}
}

func TestLogFlagsAreChecked(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "sync", "--once", "--repo", t.TempDir(), "--log-format", "yaml")
	g.Expect(r.err).To(MatchError(ContainSubstring("--log-format must be text or json")))
	r = execCairn(t, "sync", "--once", "--repo", t.TempDir(), "--log-level", "verbose")
	g.Expect(r.err).To(MatchError(ContainSubstring("--log-level must be debug, info or error")))
}

// TestWebhookRejectionIsLogged: the webhook receiver of sync --listen logs a delivery
// with a wrong signature (without the secret) through the command's logger.
func TestWebhookRejectionIsLogged(t *testing.T) {
	g := NewWithT(t)
	secretFile := filepath.Join(t.TempDir(), "secret")
	g.Expect(os.WriteFile(secretFile, []byte("hook-s3cret\n"), 0o600)).To(Succeed())
	port, err := harness.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var logs harness.LockedBuffer
	lf := &logFlags{level: "info", format: "json"}
	log, err := lf.logger(&logs)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := newForgeWiring(&forgeFlags{listen: addr, webhookSecretFile: secretFile}, &repoFlags{branch: "main"}, log)
	g.Expect(err).NotTo(HaveOccurred())
	defer w.close()
	g.Expect(w.listen(loop.New(loop.Options{}))).To(Succeed())

	var resp *http.Response
	g.Eventually(func() error {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/gitea", strings.NewReader(`{"ref":"refs/heads/main"}`))
		req.Header.Set("X-Gitea-Event", "push")
		req.Header.Set("X-Gitea-Signature", "00ff")
		resp, err = http.DefaultClient.Do(req)
		return err
	}, 5*time.Second, 50*time.Millisecond).Should(Succeed())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(jsonLines(g, logs.String())).To(ContainElement(SatisfyAll(HaveKeyWithValue("msg", "rejected a webhook delivery"),
		HaveKeyWithValue("logger", "webhooks"), HaveKeyWithValue("status", BeNumerically("==", 401)),
		HaveKeyWithValue("event", "push"))))
	g.Expect(logs.String()).NotTo(ContainSubstring("hook-s3cret"))
}

// TestUnsignedWebhookFloodDoesNotStarveSignedPushes: from the forge's own address
// (as behind a reverse proxy), a flood of unsigned and wrongly signed deliveries far
// beyond the rate budget is refused (401, then 429), and a correctly signed push
// that follows is still accepted and wakes the sync loop.
func TestUnsignedWebhookFloodDoesNotStarveSignedPushes(t *testing.T) {
	g := NewWithT(t)
	const key = "hook-s3cret"
	secretFile := filepath.Join(t.TempDir(), "secret")
	g.Expect(os.WriteFile(secretFile, []byte(key+"\n"), 0o600)).To(Succeed())
	port, err := harness.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("http://127.0.0.1:%d/hooks/gitea", port)
	w, err := newForgeWiring(&forgeFlags{listen: fmt.Sprintf("127.0.0.1:%d", port), webhookSecretFile: secretFile},
		&repoFlags{branch: "main"}, logr.Discard())
	g.Expect(err).NotTo(HaveOccurred())
	defer w.close()
	pushes := make(chan forge.Push, 1)
	g.Expect(w.serve(w.flags.listen, func(p forge.Push) { pushes <- p }, nil)).To(Succeed())

	body, err := os.ReadFile(filepath.Join("..", "..", "gitsource", "forge", "gitea", "testdata", "gitea_push.json"))
	g.Expect(err).NotTo(HaveOccurred())
	post := func(signature string) int {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("X-Gitea-Event", "push")
		if signature != "" {
			req.Header.Set("X-Gitea-Signature", signature)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	g.Eventually(func() int { return post("") }, 5*time.Second, 20*time.Millisecond).Should(Equal(http.StatusUnauthorized))
	codes := map[int]int{}
	for i := range 300 {
		sig := []string{"", "00ff", hmacHexOf("wrong-key", body)}[i%3]
		codes[post(sig)]++
	}
	t.Logf("flood of 300 unsigned or wrongly signed deliveries: %v", codes)
	g.Expect(codes[http.StatusAccepted]).To(BeZero())
	g.Expect(codes[http.StatusTooManyRequests]).To(BeNumerically(">=", 250), "the flood is beyond the budget")
	g.Expect(pushes).NotTo(Receive(), "no junk woke the loop")

	g.Expect(post(hmacHexOf(key, body))).To(Equal(http.StatusAccepted), "the signed push is accepted")
	g.Eventually(pushes).Should(Receive(), "and wakes the sync loop")
}

func hmacHexOf(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

package forge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/github"
)

// lockedBuffer is a bytes.Buffer safe for the queue's goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jsonLogger logs JSON lines into a buffer, as `cairn sync --log-format json` does.
func jsonLogger() (logr.Logger, *lockedBuffer) {
	buf := &lockedBuffer{}
	return logr.FromSlogHandler(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// logLines parses every line of buf as a JSON object.
func logLines(g *WithT, buf *lockedBuffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		line := map[string]any{}
		g.Expect(json.Unmarshal(sc.Bytes(), &line)).To(Succeed(), "a JSON line: %s", sc.Text())
		out = append(out, line)
	}
	return out
}

func TestRejectedWebhookIsLoggedWithoutTheSecret(t *testing.T) {
	g := NewWithT(t)
	log, buf := jsonLogger()
	r, _ := newReceiver(t, func(o *forge.ReceiverOptions) { o.Logger = log })
	req := delivery(github.Name, "push", fixture(t, "github_push_commit.json"), "other-key")
	req.Header.Set("X-GitHub-Delivery", "d-123")
	code, _ := serve(r, req)
	g.Expect(code).To(Equal(http.StatusUnauthorized))

	lines := logLines(g, buf)
	g.Expect(lines).To(HaveLen(1))
	g.Expect(lines[0]).To(HaveKeyWithValue("msg", "rejected a webhook delivery"))
	g.Expect(lines[0]).To(HaveKeyWithValue("level", "INFO"))
	g.Expect(lines[0]).To(HaveKeyWithValue("status", BeNumerically("==", 401)))
	g.Expect(lines[0]).To(HaveKeyWithValue("reason", "invalid signature"))
	g.Expect(lines[0]).To(HaveKeyWithValue("path", "/hooks/github"))
	g.Expect(lines[0]).To(HaveKeyWithValue("event", "push"))
	g.Expect(lines[0]).To(HaveKeyWithValue("delivery", "d-123"))
	g.Expect(buf.String()).NotTo(ContainSubstring(secret))
	g.Expect(buf.String()).NotTo(ContainSubstring(req.Header.Get("X-Hub-Signature-256")))
}

func TestRateLimitedWebhooksAreLoggedSampled(t *testing.T) {
	g := NewWithT(t)
	log, buf := jsonLogger()
	r, _ := newReceiver(t, func(o *forge.ReceiverOptions) { o.Logger, o.RatePerSecond, o.RateBurst = log, 0.001, 1 })
	limited := 0
	for range 9 {
		if code, _ := serve(r, delivery(github.Name, "ping", []byte(`{}`), secret)); code == http.StatusTooManyRequests {
			limited++
		}
	}
	g.Expect(limited).To(Equal(8))
	var counts []float64
	for _, l := range logLines(g, buf) {
		if l["status"] == float64(429) {
			counts = append(counts, l["rateLimited"].(float64))
		}
	}
	g.Expect(counts).To(Equal([]float64{1, 2, 4, 8}))
}

func TestGivenUpForgeUpdateIsLoggedWithRevisionAndInstance(t *testing.T) {
	g := NewWithT(t)
	log, buf := jsonLogger()
	srv := newStatusServer(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) })
	q := newQueue(t, srv.URL, func(o *forge.QueueOptions) { o.Logger = log })
	q.PostStatus(repo, shaA, pending("cairn/team-a/web"))
	g.Eventually(func() int { return q.Stats().Failed }).Should(Equal(1))

	g.Eventually(func() []map[string]any { return logLines(g, buf) }).Should(ContainElement(SatisfyAll(
		HaveKeyWithValue("msg", "gave up a forge update"),
		HaveKeyWithValue("level", "ERROR"),
		HaveKeyWithValue("revision", shaA),
		HaveKeyWithValue("instance", "team-a/web"),
		HaveKeyWithValue("context", "cairn/team-a/web"),
		HaveKey("err"),
	)))
	g.Expect(buf.String()).NotTo(ContainSubstring("t0ken"))
}

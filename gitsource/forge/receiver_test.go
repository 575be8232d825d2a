package forge_test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
	"cairn.dev/cairn/gitsource/forge/providers"
)

const secret = "s3cret-webhook-key"

// fixture reads a recorded delivery from the testdata of the forge that owns
// it: "gitea_push.json" is in gitea/testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	owner, _, _ := strings.Cut(name, "_")
	data, err := os.ReadFile(filepath.Join(owner, "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hmacHex(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// delivery builds a request as each forge sends it, signed with key.
func delivery(source, event string, body []byte, key string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/hooks/"+source, bytes.NewReader(body))
	req.RemoteAddr = "192.0.2.10:40000"
	req.Header.Set("Content-Type", "application/json")
	switch source {
	case gitea.Name:
		req.Header.Set("X-Gitea-Event", event)
		req.Header.Set("X-Gitea-Signature", hmacHex(key, body))
	case github.Name:
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(key, body))
	case gitlab.Name:
		req.Header.Set("X-Gitlab-Event", event)
		req.Header.Set("X-Gitlab-Token", key)
	}
	return req
}

// recorder collects the events a Receiver emits.
type recorder struct {
	mu     sync.Mutex
	events []forge.Event
}

func (r *recorder) emit(ev forge.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func newReceiver(t *testing.T, tune func(*forge.ReceiverOptions)) (*forge.Receiver, *recorder) {
	t.Helper()
	opts := forge.DefaultReceiverOptions()
	opts.Hooks = providers.Default().Hooks(secret)
	if tune != nil {
		tune(&opts)
	}
	rec := &recorder{}
	r, err := forge.NewReceiver(opts, rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	return r, rec
}

func serve(h http.Handler, req *http.Request) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func TestReceiverAcceptsRecordedDeliveries(t *testing.T) {
	tests := []struct {
		name, source, event, file string
		want                      forge.Event
	}{
		{"gitea push", gitea.Name, "push", "gitea_push.json",
			forge.Push{Source: "gitea", Repo: forge.RepoRef{Owner: "cairn", Name: "platform"}, Branch: "main", SHAHint: "2c51d6f9b27cf4480666935ecf668afc5cf612e4"}},
		{"gitea pull request opened", gitea.Name, "pull_request", "gitea_pull_request_opened.json",
			forge.PullRequest{Source: "gitea", Repo: forge.RepoRef{Owner: "cairn", Name: "platform"}, Number: 1, Action: forge.PROpened, HeadSHAHint: "3153ce8b7b0c301f48e57b84fa67cabb22e7dc8b"}},
		{"gitea pull request synchronized", gitea.Name, "pull_request", "gitea_pull_request_synchronized.json",
			forge.PullRequest{Source: "gitea", Repo: forge.RepoRef{Owner: "cairn", Name: "platform"}, Number: 1, Action: forge.PRSynchronize, HeadSHAHint: "2c51d6f9b27cf4480666935ecf668afc5cf612e4"}},
		{"github push", github.Name, "push", "github_push_commit.json",
			forge.Push{Source: "github", Repo: forge.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Branch: "main", SHAHint: "6113728f27ae82c7b1a177c8d03f9e96e0adf246"}},
		{"github branch deleted", github.Name, "push", "github_push.json",
			forge.Push{Source: "github", Repo: forge.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Branch: "main"}},
		{"github pull request opened", github.Name, "pull_request", "github_pull_request_opened.json",
			forge.PullRequest{Source: "github", Repo: forge.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Number: 2, Action: forge.PROpened, HeadSHAHint: "ec26c3e57ca3a959ca5aad62de7213c562f8c821"}},
		{"gitlab push", gitlab.Name, "Push Hook", "gitlab_push.json",
			forge.Push{Source: "gitlab", Repo: forge.RepoRef{Owner: "mike", Name: "diaspora"}, Branch: "master", SHAHint: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}},
		{"gitlab merge request opened", gitlab.Name, "Merge Request Hook", "gitlab_merge_request.json",
			forge.PullRequest{Source: "gitlab", Repo: forge.RepoRef{Owner: "gitlabhq", Name: "gitlab-test"}, Number: 1, Action: forge.PROpened, HeadSHAHint: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}},
		{"gitlab merge request pushed", gitlab.Name, "Merge Request Hook", "gitlab_merge_request_update.json",
			forge.PullRequest{Source: "gitlab", Repo: forge.RepoRef{Owner: "gitlabhq", Name: "gitlab-test"}, Number: 1, Action: forge.PRSynchronize, HeadSHAHint: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, rec := newReceiver(t, nil)
			code, body := serve(r, delivery(tt.source, tt.event, fixture(t, tt.file), secret))
			g.Expect(code).To(Equal(http.StatusAccepted), body)
			g.Expect(body).To(Equal("accepted\n"))
			g.Expect(rec.events).To(Equal([]forge.Event{tt.want}))
		})
	}
}

func TestReceiverFormEncodedPayload(t *testing.T) {
	g := NewWithT(t)
	r, rec := newReceiver(t, nil)
	body := []byte("payload=" + url.QueryEscape(string(fixture(t, "github_push_commit.json"))))
	req := delivery(github.Name, "push", body, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	code, msg := serve(r, req)
	g.Expect(code).To(Equal(http.StatusAccepted), msg)
	g.Expect(rec.events).To(HaveLen(1))
}

// TestReceiverRejections covers every rejection a delivery can get; none of
// them emits an event.
func TestReceiverRejections(t *testing.T) {
	push := func(t *testing.T) []byte { return fixture(t, "github_push_commit.json") }
	tests := []struct {
		name string
		tune func(*forge.ReceiverOptions)
		req  func(t *testing.T) *http.Request
		code int
		msg  string
	}{
		{"unknown path", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.URL.Path = "/hooks/bitbucket"
			return req
		}, http.StatusNotFound, "no such hook"},
		{"forge without a secret", func(o *forge.ReceiverOptions) {
			o.Hooks = []forge.Hook{{Provider: github.Provider{}, Secret: secret}, {Provider: gitlab.Provider{}}}
		}, func(t *testing.T) *http.Request {
			return delivery(gitlab.Name, "Push Hook", fixture(t, "gitlab_push.json"), "")
		}, http.StatusNotFound, "no such hook"},
		{"GET", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.Method = http.MethodGet
			return req
		}, http.StatusMethodNotAllowed, "POST only"},
		{"missing signature", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.Header.Del("X-Hub-Signature-256")
			return req
		}, http.StatusUnauthorized, "missing signature"},
		{"github signature by another key", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "push", push(t), "other-key")
		}, http.StatusUnauthorized, "invalid signature"},
		{"github sha1 signature only", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.Header.Del("X-Hub-Signature-256")
			req.Header.Set("X-Hub-Signature", "sha1=0123")
			return req
		}, http.StatusUnauthorized, "missing signature"},
		{"github signature without prefix", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.Header.Set("X-Hub-Signature-256", hmacHex(secret, push(t)))
			return req
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitea signature not hex", nil, func(t *testing.T) *http.Request {
			req := delivery(gitea.Name, "push", fixture(t, "gitea_push.json"), secret)
			req.Header.Set("X-Gitea-Signature", "zz")
			return req
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitea body altered after signing", nil, func(t *testing.T) *http.Request {
			req := delivery(gitea.Name, "push", fixture(t, "gitea_push.json"), secret)
			req.Body = io.NopCloser(bytes.NewReader(bytes.Replace(fixture(t, "gitea_push.json"), []byte("main"), []byte("evil"), 1)))
			return req
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitlab wrong token", nil, func(t *testing.T) *http.Request {
			return delivery(gitlab.Name, "Push Hook", fixture(t, "gitlab_push.json"), secret+"x")
		}, http.StatusUnauthorized, "invalid signature"},
		{"gitlab missing token", nil, func(t *testing.T) *http.Request {
			return delivery(gitlab.Name, "Push Hook", fixture(t, "gitlab_push.json"), "")
		}, http.StatusUnauthorized, "missing signature"},
		{"declared body over the cap", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", push(t), secret)
			req.ContentLength = 2 << 20
			return req
		}, http.StatusRequestEntityTooLarge, "body too large"},
		{"streamed body over the cap", nil, func(t *testing.T) *http.Request {
			big := append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("a"), 1<<20)...)
			req := delivery(github.Name, "push", append(big, `"}`...), secret)
			req.ContentLength = -1
			return req
		}, http.StatusRequestEntityTooLarge, "body too large"},
		{"malformed JSON", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "push", []byte(`{"ref": "refs/heads/main", `), secret)
		}, http.StatusBadRequest, "malformed payload"},
		{"JSON null", nil, func(t *testing.T) *http.Request {
			return delivery(gitea.Name, "push", []byte(`null`), secret)
		}, http.StatusBadRequest, "malformed payload: payload is not a JSON object"},
		{"push without repository", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "push", []byte(`{"ref":"refs/heads/main","repository":null}`), secret)
		}, http.StatusBadRequest, "payload without a repository name"},
		{"repository name with dot segments", nil, func(t *testing.T) *http.Request {
			return delivery(gitea.Name, "push", []byte(`{"ref":"refs/heads/main","repository":{"full_name":"../../etc"}}`), secret)
		}, http.StatusBadRequest, "malformed payload"},
		{"pull request number zero", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "pull_request", []byte(`{"action":"opened","number":0,"repository":{"full_name":"o/r"}}`), secret)
		}, http.StatusBadRequest, "out of range"},
		{"form without payload", nil, func(t *testing.T) *http.Request {
			req := delivery(github.Name, "push", []byte("a=b"), secret)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return req
		}, http.StatusBadRequest, "form body without a payload field"},
		{"unknown event", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "star", []byte(`{"action":"created"}`), secret)
		}, http.StatusAccepted, `ignored: event "star"`},
		{"ping", nil, func(t *testing.T) *http.Request {
			return delivery(github.Name, "ping", fixture(t, "github_ping.json"), secret)
		}, http.StatusAccepted, `ignored: event "ping"`},
		{"tag push", nil, func(t *testing.T) *http.Request {
			return delivery(gitea.Name, "push", []byte(`{"ref":"refs/tags/v1","repository":{"full_name":"o/r"}}`), secret)
		}, http.StatusAccepted, "ignored: push to refs/tags/v1"},
		{"other branch", func(o *forge.ReceiverOptions) { o.Branch = "production" }, func(t *testing.T) *http.Request {
			return delivery(github.Name, "push", push(t), secret)
		}, http.StatusAccepted, "ignored: branch not tracked"},
		{"other repository", func(o *forge.ReceiverOptions) { o.Repos = []string{"platform/config"} }, func(t *testing.T) *http.Request {
			return delivery(github.Name, "push", push(t), secret)
		}, http.StatusAccepted, "ignored: repository not tracked"},
		{"pull request labeled", nil, func(t *testing.T) *http.Request {
			body := bytes.Replace(fixture(t, "github_pull_request_opened.json"), []byte(`"action": "opened"`), []byte(`"action": "labeled"`), 1)
			return delivery(github.Name, "pull_request", body, secret)
		}, http.StatusAccepted, `ignored: pull request action "labeled"`},
		{"gitlab tag push hook", nil, func(t *testing.T) *http.Request {
			return delivery(gitlab.Name, "Tag Push Hook", fixture(t, "gitlab_push.json"), secret)
		}, http.StatusAccepted, `ignored: event "Tag Push Hook"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, rec := newReceiver(t, tt.tune)
			code, body := serve(r, tt.req(t))
			g.Expect(code).To(Equal(tt.code), body)
			g.Expect(body).To(ContainSubstring(tt.msg))
			g.Expect(rec.events).To(BeEmpty())
			g.Expect(body).NotTo(ContainSubstring(secret))
		})
	}
}

func TestReceiverNeedsASecret(t *testing.T) {
	g := NewWithT(t)
	_, err := forge.NewReceiver(forge.DefaultReceiverOptions(), func(forge.Event) {})
	g.Expect(err).To(MatchError(ContainSubstring("needs at least one secret")))
}

// TestReceiverReplayIsIgnored: the same delivery id is acted on once.
func TestReceiverReplayIsIgnored(t *testing.T) {
	g := NewWithT(t)
	r, rec := newReceiver(t, nil)
	for i, want := range []string{"accepted\n", "ignored: delivery already received\n"} {
		req := delivery(github.Name, "push", fixture(t, "github_push_commit.json"), secret)
		req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		code, body := serve(r, req)
		g.Expect(code).To(Equal(http.StatusAccepted))
		g.Expect(body).To(Equal(want), "delivery %d", i)
	}
	g.Expect(rec.events).To(HaveLen(1))
	g.Expect(rec.events[0]).To(HaveField("Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"))
}

// TestReceiverRateLimitsEachSource: a flood from one address gets 429 after
// its burst while another address is still served; the bucket refills.
func TestReceiverRateLimitsEachSource(t *testing.T) {
	g := NewWithT(t)
	r, rec := newReceiver(t, func(o *forge.ReceiverOptions) { o.RatePerSecond, o.RateBurst = 10, 5 })
	body := fixture(t, "github_push_commit.json")
	codes := map[int]int{}
	for i := 0; i < 50; i++ {
		code, _ := serve(r, delivery(github.Name, "push", body, secret))
		codes[code]++
	}
	g.Expect(codes[http.StatusAccepted]).To(BeNumerically("<=", 6))
	g.Expect(codes[http.StatusTooManyRequests]).To(BeNumerically(">=", 44))
	other := delivery(github.Name, "push", body, secret)
	other.RemoteAddr = "198.51.100.7:1234"
	code, _ := serve(r, other)
	g.Expect(code).To(Equal(http.StatusAccepted))
	time.Sleep(250 * time.Millisecond)
	code, _ = serve(r, delivery(github.Name, "push", body, secret))
	g.Expect(code).To(Equal(http.StatusAccepted), "the bucket refills")
	g.Expect(len(rec.events)).To(Equal(codes[http.StatusAccepted] + 2))
}

// TestReceiverRateLimitTracksBoundedSources: a flood from many addresses
// never grows the limiter past MaxSources and never fails.
func TestReceiverRateLimitTracksBoundedSources(t *testing.T) {
	g := NewWithT(t)
	r, _ := newReceiver(t, func(o *forge.ReceiverOptions) { o.MaxSources = 16 })
	for i := 0; i < 2000; i++ {
		req := delivery(github.Name, "push", []byte(`{}`), "wrong")
		req.RemoteAddr = net.JoinHostPort(net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).String(), "1")
		code, _ := serve(r, req)
		g.Expect(code).To(Equal(http.StatusUnauthorized))
	}
}

func TestReceiverRecoversFromPanics(t *testing.T) {
	g := NewWithT(t)
	opts := forge.DefaultReceiverOptions()
	opts.Hooks = []forge.Hook{{Provider: github.Provider{}, Secret: secret}}
	r, err := forge.NewReceiver(opts, func(forge.Event) { panic("boom") })
	g.Expect(err).NotTo(HaveOccurred())
	code, body := serve(r, delivery(github.Name, "push", fixture(t, "github_push_commit.json"), secret))
	g.Expect(code).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(Equal("internal error\n"))
}

func TestTriggerCoalesces(t *testing.T) {
	g := NewWithT(t)
	trig := forge.NewTrigger()
	r, err := forge.NewReceiver(forge.ReceiverOptions{Hooks: []forge.Hook{{Provider: github.Provider{}, Secret: secret}}}, func(forge.Event) { trig.Fire() })
	g.Expect(err).NotTo(HaveOccurred())
	body := fixture(t, "github_push_commit.json")
	for i := 0; i < 10; i++ {
		code, _ := serve(r, delivery(github.Name, "push", body, secret))
		g.Expect(code).To(Equal(http.StatusAccepted))
	}
	g.Expect(trig.C()).To(Receive())
	g.Expect(trig.C()).NotTo(Receive(), "ten pushes became one wake-up")
	trig.Fire()
	g.Expect(trig.C()).To(Receive())
}

func TestNewServerSetsTimeouts(t *testing.T) {
	g := NewWithT(t)
	srv := forge.NewServer("127.0.0.1:0", http.NotFoundHandler())
	g.Expect(srv.ReadHeaderTimeout).To(Equal(forge.ServerReadHeaderTimeout))
	g.Expect(srv.ReadTimeout).To(BeNumerically(">", 0))
	g.Expect(srv.WriteTimeout).To(BeNumerically(">", 0))
	g.Expect(srv.IdleTimeout).To(BeNumerically(">", 0))
	g.Expect(srv.MaxHeaderBytes).To(Equal(64 << 10))
}

// TestServerDropsSlowloris: a client that never finishes its headers is
// disconnected after the header timeout (shortened here).
func TestServerDropsSlowloris(t *testing.T) {
	g := NewWithT(t)
	r, _ := newReceiver(t, nil)
	srv := forge.NewServer("", r)
	srv.ReadHeaderTimeout = 200 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	conn, err := net.Dial("tcp", l.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	_, _ = conn.Write([]byte("POST /hooks/github HTTP/1.1\r\nHost: x\r\nX-Slow: "))
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = bufio.NewReader(conn).ReadString('\n')
	g.Expect(err).To(HaveOccurred(), "the server closed the connection")
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
}

// TestReceiverOverHTTP: a real server and client, and no event for a body
// cut off by the cap.
func TestReceiverOverHTTP(t *testing.T) {
	g := NewWithT(t)
	r, rec := newReceiver(t, nil)
	srv := httptest.NewServer(r)
	defer srv.Close()
	body := fixture(t, "gitlab_push.json")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/gitlab", bytes.NewReader(body))
	req.Header.Set("X-Gitlab-Event", "Push Hook")
	req.Header.Set("X-Gitlab-Token", secret)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	big, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/gitlab", strings.NewReader(strings.Repeat("x", 2<<20)))
	big.Header.Set("X-Gitlab-Token", secret)
	resp, err = http.DefaultClient.Do(big)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
	g.Expect(rec.events).To(HaveLen(1))
}

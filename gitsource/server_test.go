package gitsource

import (
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cairn.dev/cairn/test/harness"
)

// gitHTTPServer serves the repositories of one directory over smart HTTP on
// loopback with git-http-backend (the git CLI, tests only), optionally behind
// basic auth, and records what it saw.
type gitHTTPServer struct {
	*httptest.Server
	user, pass string
	requests   atomic.Int64
	packBytes  atomic.Int64 // bytes of the last upload-pack response

	mu          sync.Mutex
	authHeaders []string
}

func gitHTTPBackend(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal("git CLI not available (the CI installs it):", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
}

func newGitHTTPServer(t *testing.T, repoDir, user, pass string) *gitHTTPServer {
	t.Helper()
	s := &gitHTTPServer{user: user, pass: pass}
	backend := &cgi.Handler{
		Path:       gitHTTPBackend(t),
		Env:        []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repoDir), "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		if s.user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != s.user || p != s.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			backend.ServeHTTP(w, r)
			return
		}
		// Counted as written: the client may have read the whole pack and returned
		// before this handler does, so a count stored afterwards could be read late.
		s.packBytes.Store(0)
		backend.ServeHTTP(&countingWriter{ResponseWriter: w, n: &s.packBytes}, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *gitHTTPServer) record(r *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authHeaders = append(s.authHeaders, r.Header.Get("Authorization"))
}

func (s *gitHTTPServer) seenAuth() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authHeaders...)
}

func (s *gitHTTPServer) repoURL(repoDir string) string {
	return s.URL + "/" + filepath.Base(repoDir)
}

// countingWriter adds the bytes it writes to n before they reach the client.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// hangingListener accepts TCP connections on loopback and never answers.
func hangingListener(t *testing.T) string { return harness.HangingListener(t) }

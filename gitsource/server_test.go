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
		cw := &countingWriter{ResponseWriter: w}
		backend.ServeHTTP(cw, r)
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			s.packBytes.Store(cw.n)
		}
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

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// hangingListener accepts TCP connections on loopback and never answers.
func hangingListener(t *testing.T) string { return harness.HangingListener(t) }

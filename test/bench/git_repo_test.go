package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoFiles is the number of files in the tree of a benchmark repository.
const repoFiles = 50

// gitRepo is a bare repository built with `git fast-import`: a first commit
// adds repoFiles small YAML files in 10 directories, each later commit
// changes one of them.
type gitRepo struct {
	t       *testing.T
	dir     string
	commits int
	files   map[string]string // the tree at the tip
}

// newGitRepo creates <root>/repo-<commits>.git with that many commits on
// main, repacked as a server's repository would be.
func newGitRepo(t *testing.T, root string, commits int) *gitRepo {
	t.Helper()
	r := &gitRepo{t: t, dir: filepath.Join(root, fmt.Sprintf("repo-%d.git", commits)), files: map[string]string{}}
	gitRun(t, "", "init", "--quiet", "--bare", "--initial-branch=main", r.dir)
	r.appendCommits(commits)
	gitRun(t, r.dir, "repack", "-a", "-d", "-q")
	return r
}

func (r *gitRepo) name() string { return filepath.Base(r.dir) }

// appendCommits adds n commits on main and returns the new tip.
func (r *gitRepo) appendCommits(n int) string {
	r.t.Helper()
	var b bytes.Buffer
	for i := range n {
		c := r.commits
		r.commits++
		msg := fmt.Sprintf("change %d\n", c)
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\ndata %d\n%s", 1_700_000_000+c, len(msg), msg)
		if i == 0 && c > 0 {
			b.WriteString("from refs/heads/main^0\n")
		}
		for _, k := range r.touched(c) {
			path, content := repoFile(k, c)
			r.files[path] = content
			fmt.Fprintf(&b, "M 100644 inline %s\ndata %d\n%s\n", path, len(content), content)
		}
	}
	cmd := gitCmd("fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = r.dir, &b
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git fast-import: %v: %s", err, out)
	}
	return r.head()
}

// touched lists the files commit c writes: all of them first, then one.
func (r *gitRepo) touched(c int) []int {
	if c > 0 {
		return []int{c % repoFiles}
	}
	all := make([]int, repoFiles)
	for k := range all {
		all[k] = k
	}
	return all
}

// repoFile is file k as commit c writes it: a few hundred bytes of YAML.
func repoFile(k, c int) (path, content string) {
	path = fmt.Sprintf("apps/team-%d/app-%02d.yaml", k%10, k)
	content = fmt.Sprintf("name: app-%02d\nrevision: %d\nreplicas: %d\nimage: ghcr.io/example/app-%02d:1.%d.0\n%s",
		k, c, c%5+1, k, c, strings.Repeat("# padding line of a realistic config file\n", 6))
	return path, content
}

func (r *gitRepo) head() string {
	r.t.Helper()
	return gitRun(r.t, r.dir, "rev-parse", "refs/heads/main")
}

func (r *gitRepo) root() string {
	r.t.Helper()
	return gitRun(r.t, r.dir, "rev-list", "--max-parents=0", "refs/heads/main")
}

// gitCmd is the git CLI isolated from the user's and the system's config.
func gitCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	return cmd
}

// gitRun runs git in dir and returns its trimmed stdout; failure fails t.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitOutput(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := gitCmd(args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// gitServer serves the repositories of a directory over smart HTTP on
// loopback with git-http-backend, and counts what it sends.
type gitServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen traffic
}

// traffic is what the server sent since the last reset: response body
// bytes, requests, and responses that carried a pack.
type traffic struct {
	bytes, requests, packs int64
}

func newGitServer(t *testing.T, root string) *gitServer {
	t.Helper()
	execPath, err := gitOutput("", "--exec-path")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(execPath, "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(),
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	s := &gitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &packSniffer{ResponseWriter: w}
		backend.ServeHTTP(cw, r)
		s.record(cw)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *gitServer) record(cw *packSniffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen.bytes += cw.n
	s.seen.requests++
	if cw.pack {
		s.seen.packs++
	}
}

// take returns the traffic since the last take and starts counting anew.
func (s *gitServer) take() traffic {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.seen
	s.seen = traffic{}
	return t
}

func (s *gitServer) url(r *gitRepo) string { return s.URL + "/" + r.name() }

// packSniffer counts the bytes of a response and notes whether they hold a
// pack file's "PACK" signature (also across writes).
type packSniffer struct {
	http.ResponseWriter
	n    int64
	tail []byte
	pack bool
}

func (w *packSniffer) Write(p []byte) (int, error) {
	buf := append(w.tail, p...) // tail is a clone of len == cap: this copies
	w.pack = w.pack || bytes.Contains(buf, []byte("PACK"))
	w.tail = bytes.Clone(buf[max(0, len(buf)-3):])
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

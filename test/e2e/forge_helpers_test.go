package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	giteaharness "cairn.dev/cairn/test/forge"

	"cairn.dev/cairn/test/harness"
)

// forgeEnv is the forge loop end to end: a real Gitea holding the platform
// repository, whose webhook points at a `cairn sync` subprocess that posts commit
// statuses and plan comments back to it.
type forgeEnv struct {
	*env
	gitea  *giteaharness.Gitea
	repo   forge.RepoRef
	clone  *git.Repository // main, cloned over HTTP; pushes go through it
	fs     billy.Filesystem
	auth   *githttp.BasicAuth
	secret string
	cairn  *cairnProcess
	cache  string   // cairn's --cache-dir
	shas   []string // every commit the test made
}

// newForgeEnv starts Gitea, creates the repository and pushes files to main.
func newForgeEnv(t *testing.T, e *env, files map[string]string) (*forgeEnv, string) {
	t.Helper()
	begin := time.Now()
	g, err := giteaharness.StartGitea(e.ctx, t.TempDir())
	if err != nil {
		t.Fatalf("failed to start gitea (the forge test needs it; it never skips): %v", err)
	}
	t.Cleanup(g.Stop)
	t.Logf("gitea %s ready at %s in %s", giteaharness.Version, g.URL, time.Since(begin).Round(time.Millisecond))
	repo, err := g.CreateRepo(e.ctx, "platform")
	if err != nil {
		t.Fatal(err)
	}
	f := &forgeEnv{env: e, gitea: g, repo: repo, fs: memfs.New(), secret: fmt.Sprintf("whsec-%016x", rand.Uint64()),
		auth: &githttp.BasicAuth{Username: g.AdminUser, Password: g.Token}}
	f.clone, err = git.Clone(memory.NewStorage(), f.fs, &git.CloneOptions{URL: f.gitURL(), Auth: f.auth})
	if err != nil {
		t.Fatalf("failed to clone %s: %v", f.gitURL(), err)
	}
	return f, f.push("platform: app module, Platform, instances", files)
}

// gitURL is the repository's HTTP URL without credentials (the repository is public).
func (f *forgeEnv) gitURL() string { return f.gitea.URL + "/" + f.repo.String() + ".git" }

// push commits files (an empty content removes the file) on main with go-git and
// pushes over HTTP with the admin's credentials; it returns the new commit's SHA.
func (f *forgeEnv) push(msg string, files map[string]string) string {
	f.t.Helper()
	wt, err := f.clone.Worktree()
	f.g.Expect(err).NotTo(HaveOccurred())
	for name, content := range files {
		if content == "" {
			_, err := wt.Remove(name)
			f.g.Expect(err).NotTo(HaveOccurred())
			continue
		}
		f.g.Expect(f.fs.MkdirAll(filepath.Dir(name), 0o755)).To(Succeed())
		w, err := f.fs.Create(name)
		f.g.Expect(err).NotTo(HaveOccurred())
		_, err = w.Write([]byte(content))
		f.g.Expect(err).NotTo(HaveOccurred())
		f.g.Expect(w.Close()).To(Succeed())
		_, err = wt.Add(name)
		f.g.Expect(err).NotTo(HaveOccurred())
	}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()}})
	f.g.Expect(err).NotTo(HaveOccurred())
	f.g.Expect(f.clone.PushContext(f.ctx, &git.PushOptions{Auth: f.auth})).To(Succeed())
	f.shas = append(f.shas, h.String())
	return h.String()
}

// putFile commits one file on branch through Gitea's contents API (from set: as the
// first commit of a new branch forked from it) and returns the commit's SHA.
func (f *forgeEnv) putFile(branch, from, path, content string) string {
	f.t.Helper()
	sha, err := f.gitea.PutFile(f.ctx, f.repo, branch, from, path, content)
	f.g.Expect(err).NotTo(HaveOccurred())
	f.g.Expect(sha).To(HaveLen(40))
	f.shas = append(f.shas, sha)
	return sha
}

// startCairn writes the token and the webhook secret to files, adds the webhook to
// the repository and starts `cairn sync` with a 10-minute interval (so every sync
// after the first comes from a webhook), waiting until its webhook server answers.
func (f *forgeEnv) startCairn(bin string) {
	f.t.Helper()
	dir := f.t.TempDir()
	tokenFile, secretFile := filepath.Join(dir, "token"), filepath.Join(dir, "webhook-secret")
	f.g.Expect(os.WriteFile(tokenFile, []byte(f.gitea.Token+"\n"), 0o600)).To(Succeed())
	f.g.Expect(os.WriteFile(secretFile, []byte(f.secret+"\n"), 0o600)).To(Succeed())
	addr := freeLoopbackAddr(f.t)
	f.cache = filepath.Join(dir, "cache")
	f.g.Expect(f.gitea.AddWebhook(f.ctx, f.repo, "http://"+addr+"/hooks/gitea", f.secret, "push", "pull_request")).To(Succeed())
	f.cairn = startCairnProcess(f.t, bin,
		"sync", "--repo", f.gitURL(), "--interval", "10m", "--drift-interval", "0",
		"--forge", "gitea", "--forge-url", f.gitea.URL, "--forge-token-file", tokenFile,
		"--listen", addr, "--webhook-secret-file", secretFile,
		"--kubeconfig", f.cluster.Kubeconfig, "--cache-dir", f.cache)
	f.cairn.waitListening(f.t, "http://"+addr+"/hooks/gitea")
}

// statuses returns the statuses Gitea holds for sha by context, each context's in
// the order they were posted.
func (f *forgeEnv) statuses(sha string) map[string][]giteaharness.CommitStatus {
	f.t.Helper()
	list, err := f.gitea.Statuses(f.ctx, f.repo, sha)
	f.g.Expect(err).NotTo(HaveOccurred())
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	out := map[string][]giteaharness.CommitStatus{}
	for _, s := range list {
		out[s.Context] = append(out[s.Context], s)
	}
	return out
}

// latest returns the newest status of context on sha (zero when there is none).
func (f *forgeEnv) latest(sha, context string) giteaharness.CommitStatus {
	h := f.statuses(sha)[context]
	if len(h) == 0 {
		return giteaharness.CommitStatus{}
	}
	return h[len(h)-1]
}

// states lists the states posted for context on sha, oldest first.
func (f *forgeEnv) states(sha, context string) []string {
	var out []string
	for _, s := range f.statuses(sha)[context] {
		out = append(out, s.State)
	}
	return out
}

// waitState waits until the newest status of context on sha has state and returns it.
func (f *forgeEnv) waitState(sha, context, state string) giteaharness.CommitStatus {
	f.t.Helper()
	f.g.Eventually(func() string { return f.latest(sha, context).State }, 60*time.Second, 100*time.Millisecond).
		Should(Equal(state), "status %s on %s; cairn's output:\n%s", context, sha, f.cairn)
	return f.latest(sha, context)
}

// expectNothingPending checks that no status cairn posted is left pending on any
// commit the test made.
func (f *forgeEnv) expectNothingPending() {
	f.t.Helper()
	for _, sha := range f.shas {
		for context, history := range f.statuses(sha) {
			f.g.Expect(history[len(history)-1].State).NotTo(Equal("pending"), "%s on %s is left pending", context, sha)
		}
	}
}

// waitKeptPlan waits until the JSON plan cairn keeps for pull request number is
// the plan of head.
func (f *forgeEnv) waitKeptPlan(number int, head string) {
	f.t.Helper()
	path := filepath.Join(f.cache, "plans", f.repo.Owner, f.repo.Name, fmt.Sprintf("pr-%d.json", number))
	f.g.Eventually(func() (string, error) {
		var plan struct {
			Revision string `json:"revision"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		return plan.Revision, json.Unmarshal(b, &plan)
	}, 10*time.Second, 100*time.Millisecond).Should(Equal(head), "the full JSON plan is kept at %s", path)
}

// planComments returns the comments of pull request number that carry cairn's marker.
func (f *forgeEnv) planComments(number int) []giteaharness.Comment {
	f.t.Helper()
	all, err := f.gitea.Comments(f.ctx, f.repo, number)
	f.g.Expect(err).NotTo(HaveOccurred())
	var out []giteaharness.Comment
	for _, c := range all {
		if strings.Contains(c.Body, forge.PlanMarker) {
			out = append(out, c)
		}
	}
	return out
}

// waitPlanComment waits until pull request number has a plan comment for head
// and returns it.
func (f *forgeEnv) waitPlanComment(number int, head string) giteaharness.Comment {
	f.t.Helper()
	var found giteaharness.Comment
	f.g.Eventually(func() bool {
		for _, c := range f.planComments(number) {
			if strings.Contains(c.Body, "## cairn plan for `"+head[:12]+"`") {
				found = c
				return true
			}
		}
		return false
	}, 60*time.Second, 200*time.Millisecond).Should(BeTrue(), "plan comment for %s on #%d; cairn's output:\n%s", head, number, f.cairn)
	return found
}

// freeLoopbackAddr returns 127.0.0.1:PORT with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cairnProcess is a running cairn subprocess with its combined output.
type cairnProcess struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

func startCairnProcess(t *testing.T, bin string, args ...string) *cairnProcess {
	t.Helper()
	return startCairnProcessWithEnv(t, bin, nil, args...)
}

// startCairnProcessWithEnv starts cairn with env (KEY=VALUE) added to the test's.
func startCairnProcessWithEnv(t *testing.T, bin string, env []string, args ...string) *cairnProcess {
	t.Helper()
	p := &cairnProcess{cmd: exec.Command(bin, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("failed to start cairn: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("cairn's output:\n%s", p.out.String())
		}
	})
	return p
}

// waitListening waits until the webhook server answers an unsigned delivery
// (with 401) or the process exits.
func (p *cairnProcess) waitListening(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("cairn exited before it listened: %v\n%s", p.err, p.out.String())
		default:
		}
		resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("an unsigned delivery got %s, want 401 Unauthorized", resp.Status)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("cairn's webhook server did not answer on %s within 30s\n%s", url, p.out.String())
}

// stop sends SIGTERM and waits up to timeout for the exit; it returns how long the
// exit took and the exit error (nil for a clean exit).
func (p *cairnProcess) stop(timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("failed to send SIGTERM: %w", err)
	}
	select {
	case <-p.done:
		return time.Since(begin), p.err
	case <-time.After(timeout):
		return time.Since(begin), errors.New("still running " + timeout.String() + " after SIGTERM")
	}
}

func (p *cairnProcess) String() string { return tail(p.out.String(), 60) }

// lockedBuffer collects output written and read concurrently.
type lockedBuffer = harness.LockedBuffer

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// waitInstance waits until the instance's CR records sha as applied and is Ready,
// and returns how long that took from since.
func (f *forgeEnv) waitInstance(name, sha string, since time.Time, within time.Duration) time.Duration {
	f.t.Helper()
	f.g.Eventually(func() bool {
		mi := f.instance(f.ns, name)
		return mi != nil && mi.Status.LastAppliedRevision == sha && isTrue(mi, "Ready")
	}, within, 50*time.Millisecond).Should(BeTrue(), "instance %s/%s applied at %s and Ready; cairn's output:\n%s", f.ns, name, sha, f.cairn)
	return time.Since(since)
}

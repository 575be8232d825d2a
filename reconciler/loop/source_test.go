package loop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
)

// gitRepoDir makes a Git repository with one commit on main.
func gitRepoDir(t *testing.T) string {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte("kind: Platform\n"), 0o644)).To(Succeed())
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	return dir
}

// TestPollOfAnUnchangedBranchDoesNothingElse: with the head already synced and
// nothing failed, a poll resolves the branch and stops there: no fetch (the cache
// stays empty), no render and no cluster call (the loop has no engine at all).
func TestPollOfAnUnchangedBranchDoesNothingElse(t *testing.T) {
	g := NewWithT(t)
	cache := t.TempDir()
	repo := NewGitRepo(gitsource.Options{URL: "file://" + gitRepoDir(t), Branch: "main", CacheDir: cache}, "")
	head, err := repo.Head(context.Background())
	g.Expect(err).NotTo(HaveOccurred())

	l := New(Options{Source: repo})
	l.last = head
	res, err := l.poll(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeNil())
	fetched, _ := filepath.Glob(filepath.Join(cache, "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).To(BeEmpty(), "no fetch for an unchanged branch")

	// the same look finds the pack once something is fetched
	rev, err := repo.Read(context.Background(), head, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rev.SHA).To(Equal(head))
	fetched, _ = filepath.Glob(filepath.Join(cache, "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).NotTo(BeEmpty())
}

// TestAForkIsReadWithoutOurCredentials: the head of a pull request from a fork is
// read from the fork's URL on the same host, and the request carries none of the
// repository's credentials; the repository itself still gets them.
func TestAForkIsReadWithoutOurCredentials(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	seen := map[string]bool{} // path -> had an Authorization header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization") != ""
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	repo := NewGitRepo(gitsource.Options{
		URL: srv.URL + "/ops/platform.git", Branch: "main", CacheDir: t.TempDir(), AllowHTTP: true,
		Auth: &gitsource.Auth{Username: "cairn", Password: "s3cret"},
	}, "")
	_, err := repo.ReadRef(context.Background(), "main")
	g.Expect(err).To(HaveOccurred())
	fork := repo.Fork("someone/platform")
	_, err = fork.ReadRef(context.Background(), "feature")
	g.Expect(err).To(HaveOccurred())
	mu.Lock()
	defer mu.Unlock()
	g.Expect(seen).To(HaveKeyWithValue("/ops/platform.git/info/refs", true))
	g.Expect(seen).To(HaveKeyWithValue("/someone/platform.git/info/refs", false))
	g.Expect(fork.opts.Auth).To(BeNil())
}

func TestForkURL(t *testing.T) {
	tests := []struct{ repo, fork, want string }{
		{"https://user:tok@git.example.com/ops/platform.git", "someone/platform", "https://git.example.com/someone/platform.git"},
		{"ssh://git@git.example.com/ops/platform.git", "/someone/platform/", "ssh://git.example.com/someone/platform.git"},
	}
	for _, tt := range tests {
		NewWithT(t).Expect(forkURL(tt.repo, tt.fork)).To(Equal(tt.want), tt.repo)
	}
}

// treeSource reads every revision as one tree and counts its reads.
type treeSource struct {
	tree  *gitsource.Tree
	reads int
}

func (s *treeSource) Head(context.Context) (string, error) { return "", nil }

func (s *treeSource) Read(_ context.Context, head, base string) (reconciler.Revision, error) {
	s.reads++
	return reconciler.Revision{SHA: head, Base: base, Tree: s.tree, Changed: []string{"a.yaml"}, Refreshed: []string{"charts"}}, nil
}

// TestReadThroughTakesTheLeadersRecentRevisions: the instance reconciles of a
// controller read a revision its leader's loop has just read from memory, as read
// from no base (no diff, no refresh: those were the loop's), and fetch any other.
func TestReadThroughTakesTheLeadersRecentRevisions(t *testing.T) {
	g := NewWithT(t)
	tree, err := gitsource.ReadDir(t.TempDir(), gitsource.Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	leader, own := &treeSource{tree: tree}, &treeSource{tree: tree}
	recent := &Recent{Source: leader}
	replica := ReadThrough{Recent: recent, Source: own}
	ctx := context.Background()

	for _, sha := range []string{"one", "two", "three"} {
		_, err := recent.Read(ctx, sha, "base")
		g.Expect(err).NotTo(HaveOccurred())
	}
	rev, err := replica.Read(ctx, "three", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.reads).To(BeZero(), "read from memory")
	g.Expect(rev.SHA).To(Equal("three"))
	g.Expect(rev.Tree).To(BeIdenticalTo(tree))
	g.Expect(rev.Changed).To(BeNil())
	g.Expect(rev.Base).To(BeEmpty())
	g.Expect(rev.Refreshed).To(BeNil())

	_, err = replica.Read(ctx, "two", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.reads).To(BeZero())
	_, err = replica.Read(ctx, "one", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.reads).To(Equal(1), "only the last two are kept")
	_, err = replica.Read(ctx, "three", "two")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(own.reads).To(Equal(2), "a diff is its own to read")
}

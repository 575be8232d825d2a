package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource"
)

// B4: cairn's gitsource (go-git, in-process) against the git CLI, both
// talking smart HTTP to git-http-backend on loopback: cold clone, no-op poll
// and incremental fetch of one commit, on repositories of 1e2 and 1e4 commits.

func TestB4GitSource(t *testing.T) {
	sizes := pick([]int{100, 10_000}, []int{100})
	root := t.TempDir()
	srv := newGitServer(t, root)
	tb := newTable("B4 git: cairn gitsource vs git CLI, smart HTTP on loopback",
		"operation", "commits", "cairn", "git", "cairn speed-up (git ÷ cairn)", "cairn bytes", "git bytes")
	for _, n := range sizes {
		b := &gitBench{t: t, srv: srv, repo: newGitRepo(t, root, n), size: n, tb: tb}
		b.coldClone(pick(max(3, 700/n), 1))
		b.noopPoll(pick(20, 2))
		b.incrementalFetch(pick(7, 1))
	}
	tb.note("times are medians; bytes are HTTP response bodies sent by git-http-backend for one run")
	tb.note("tree of %d files in 10 directories, each commit changes one file; git %s with its default protocol (v2), go-git speaks v0", repoFiles, gitVersion(t))
	tb.note("cairn cold clone = gitsource New+Head+Fetch+Tree (files read into memory) into an empty cache; git clone checks the files out")
	tb.note("no-op poll = gitsource Head vs `git ls-remote URL refs/heads/main`; neither response carried a pack (asserted)")
	tb.note("incremental fetch = gitsource Fetch(new tip) vs `git fetch` in the full clone, after one commit was added on the server")
	tb.report(t, "B4")
}

// gitBench measures one repository size and adds its rows to tb.
type gitBench struct {
	t    *testing.T
	srv  *gitServer
	repo *gitRepo
	size int // commits when created
	tb   *table

	src   *gitsource.Source // a synced cache, kept from the cold clones
	clone string            // a full git clone, kept from the cold clones
}

// measured is one operation of one tool: its times and what the server sent
// in its last run.
type measured struct {
	times samples
	sent  traffic
}

func (b *gitBench) row(op string, cairn, git measured) {
	c, g := cairn.times.median(), git.times.median()
	b.tb.add(op, b.size, ms(c), ms(g), ratio(float64(g), float64(c)), byteSize(cairn.sent.bytes), byteSize(git.sent.bytes))
}

// each runs setup (untimed, may be nil) then every fn once per rep, rotating
// which fn goes first so that none always runs on a cold or a warm server.
func (b *gitBench) each(reps int, setup func(), fns ...func() error) []measured {
	m := make([]measured, len(fns))
	for rep := range reps {
		if setup != nil {
			setup()
		}
		b.srv.take()
		for k := range fns {
			i := (rep + k) % len(fns)
			m[i].times = append(m[i].times, timeIt(b.t, 1, func(int) error { return fns[i]() })...)
			m[i].sent = b.srv.take()
		}
	}
	return m
}

func (b *gitBench) coldClone(reps int) {
	g := NewWithT(b.t)
	ctx, url, head := context.Background(), b.srv.url(b.repo), b.repo.head()
	var trees []*gitsource.Tree
	m := b.each(reps, nil, func() error {
		src, tree, err := cairnClone(ctx, url, b.t.TempDir())
		b.src, trees = src, append(trees, tree)
		return err
	}, func() error {
		b.clone = filepath.Join(b.t.TempDir(), "clone")
		_, err := gitOutput("", "clone", "--quiet", "--single-branch", "--no-tags", "--branch=main", url, b.clone)
		return err
	}, func() error {
		dir := filepath.Join(b.t.TempDir(), "shallow")
		_, err := gitOutput("", "clone", "--quiet", "--depth=1", "--single-branch", "--no-tags", "--branch=main", url, dir)
		if err == nil && gitRun(b.t, dir, "rev-parse", "HEAD") != head {
			err = fmt.Errorf("shallow clone is not at %s", head)
		}
		return err
	})
	for _, tree := range trees {
		g.Expect(treeFiles(tree)).To(Equal(b.repo.files), "cairn's tree is the tip's")
	}
	g.Expect(b.src.HasCommit(b.repo.root())).To(BeTrue(), "cairn's cache holds the whole history")
	g.Expect(gitRun(b.t, b.clone, "rev-list", "--count", "HEAD")).To(Equal(fmt.Sprint(b.size)))
	g.Expect(m[0].sent.packs).To(Equal(int64(1)))
	b.row("cold clone (git clone --single-branch --no-tags)", m[0], m[1])
	b.row("cold clone (git clone --depth 1)", m[0], m[2])
}

// cairnClone is a first sync into an empty cache: Head, Fetch, Tree.
func cairnClone(ctx context.Context, url, cacheDir string) (*gitsource.Source, *gitsource.Tree, error) {
	src, err := gitsource.New(gitsource.Options{URL: url, Branch: "main", CacheDir: cacheDir, AllowHTTP: true, Timeout: 10 * time.Minute})
	if err != nil {
		return nil, nil, err
	}
	head, err := src.Head(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := src.Fetch(ctx, head); err != nil {
		return nil, nil, err
	}
	tree, err := src.Tree(ctx, head, "")
	return src, tree, err
}

func treeFiles(tree *gitsource.Tree) map[string]string {
	m := map[string]string{}
	for _, p := range tree.Files() {
		b, _ := tree.Bytes(p)
		m[p] = string(b)
	}
	return m
}

func (b *gitBench) noopPoll(reps int) {
	g := NewWithT(b.t)
	ctx, url, head := context.Background(), b.srv.url(b.repo), b.repo.head()
	m := b.each(reps, nil, func() error {
		h, err := b.src.Head(ctx)
		if err == nil && h != head {
			err = fmt.Errorf("Head = %s, want %s", h, head)
		}
		return err
	}, func() error {
		out, err := gitOutput("", "ls-remote", url, "refs/heads/main")
		if err == nil && !strings.HasPrefix(out, head) {
			err = fmt.Errorf("ls-remote = %q, want %s", out, head)
		}
		return err
	})
	g.Expect(m[0].sent.packs).To(BeZero(), "cairn's no-op poll must not transfer a pack")
	g.Expect(m[0].sent.requests).To(Equal(int64(1)), "cairn's no-op poll is one round trip")
	g.Expect(m[1].sent.packs).To(BeZero())
	b.row("no-op poll (git ls-remote)", m[0], m[1])
}

func (b *gitBench) incrementalFetch(reps int) {
	g := NewWithT(b.t)
	ctx := context.Background()
	var tip string
	m := b.each(reps, func() { tip = b.repo.appendCommits(1) }, func() error {
		return b.src.Fetch(ctx, tip)
	}, func() error {
		_, err := gitOutput(b.clone, "fetch", "--quiet", "--no-tags")
		return err
	})
	tree, err := b.src.Tree(ctx, tip, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(treeFiles(tree)).To(Equal(b.repo.files), "cairn has the new tip")
	g.Expect(gitRun(b.t, b.clone, "rev-parse", "refs/remotes/origin/main")).To(Equal(tip), "git has the new tip")
	g.Expect(m[0].sent.packs).To(Equal(int64(1)))
	g.Expect(m[0].sent.bytes).To(BeNumerically("<", 64<<10), "an incremental fetch sends only the new objects")
	b.row("incremental fetch, 1 new commit (git fetch)", m[0], m[1])
}

func gitVersion(t *testing.T) string {
	return strings.TrimPrefix(gitRun(t, "", "version"), "git version ")
}

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitRepo is a platform repository on disk, committed with go-git.
type gitRepo struct {
	t   testing.TB
	dir string
	r   *git.Repository
}

func newGitRepo(t testing.TB, files map[string]string) *gitRepo {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{dir}}); err != nil {
		t.Fatal(err)
	}
	g := &gitRepo{t: t, dir: dir, r: r}
	g.commit("initial", files)
	return g
}

func (g *gitRepo) url() string { return "file://" + g.dir }

// commit writes files (an empty content removes the file) and commits them.
func (g *gitRepo) commit(msg string, files map[string]string) string {
	g.t.Helper()
	wt, err := g.r.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(g.dir, name)
		if content == "" {
			if _, err := wt.Remove(name); err != nil {
				g.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			g.t.Fatal(err)
		}
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		AllowEmptyCommits: true,
		Author:            &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return h.String()
}

// copyDir reads a directory into a file map, relative paths under prefix.
func copyDir(t testing.TB, src, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out[filepath.ToSlash(filepath.Join(prefix, rel))] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

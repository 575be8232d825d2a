package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestPollOfAnUnchangedBranchDoesNothingElse: with the head already synced and
// nothing failed, a poll resolves the branch and stops there: no fetch (the cache
// stays empty), no render and no cluster call (the syncer has no engine at all).
func TestPollOfAnUnchangedBranchDoesNothingElse(t *testing.T) {
	g := NewWithT(t)
	dir := writeRepoDir(t, cliRepo(nil))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
	}
	cache := t.TempDir()
	repo := &repoFlags{repo: "file://" + dir, branch: "main", cacheDir: cache}
	s := &syncer{repo: repo, out: io.Discard, errOut: io.Discard}
	head, err := s.head(context.Background())
	g.Expect(err).NotTo(HaveOccurred())

	s.last = head
	res, err := s.poll(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeNil())
	fetched, _ := filepath.Glob(filepath.Join(cache, "git", "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).To(BeEmpty(), "no fetch for an unchanged branch")

	// the same look finds the pack once something is fetched
	g.Expect(s.src.Fetch(context.Background(), head)).To(Succeed())
	fetched, _ = filepath.Glob(filepath.Join(cache, "git", "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).NotTo(BeEmpty())
}

package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
	s.retryAt = time.Now().Add(time.Minute) // a failed instance, not due yet
	res, err = s.poll(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeNil(), "a retry that is not due does not re-run the revision")
	fetched, _ := filepath.Glob(filepath.Join(cache, "git", "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).To(BeEmpty(), "no fetch for an unchanged branch")

	// the same look finds the pack once something is fetched
	g.Expect(s.src.Fetch(context.Background(), head)).To(Succeed())
	fetched, _ = filepath.Glob(filepath.Join(cache, "git", "*", "objects", "pack", "*.pack"))
	g.Expect(fetched).NotTo(BeEmpty())
}

// TestRetryTimerWakesTheLoopWhenDue: the loop's retry timer fires when the earliest
// retry is due, not at the next poll, never sooner than a second, and not at all
// when nothing is to be retried.
func TestRetryTimerWakesTheLoopWhenDue(t *testing.T) {
	g := NewWithT(t)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	s := &syncer{}
	s.armRetry(timer)
	g.Consistently(timer.C, 1500*time.Millisecond).ShouldNot(Receive(), "nothing to retry")

	start := time.Now()
	s.retryAt = start.Add(-time.Minute) // overdue
	s.armRetry(timer)
	g.Eventually(timer.C, 3*time.Second).Should(Receive())
	g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "an overdue retry waits a second, never spins")

	start = time.Now()
	s.retryAt = start.Add(2 * time.Second)
	s.armRetry(timer)
	g.Eventually(timer.C, 4*time.Second).Should(Receive())
	g.Expect(time.Since(start)).To(BeNumerically("~", 2*time.Second, 500*time.Millisecond))
}

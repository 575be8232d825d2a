package loop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestPollSyncsWhenTheHeadMovedOrARetryIsDue: a poll syncs a new head, a failed
// instance whose retry is due, a directory (it has no cheap head) and the first
// revision; an unchanged head with nothing due costs one Head and nothing else.
func TestPollSyncsWhenTheHeadMovedOrARetryIsDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, last, head string
		retryAt          time.Time
		want             []string
	}{
		{name: "first poll", head: "a", want: []string{"a"}},
		{name: "unchanged head", last: "a", head: "a"},
		{name: "head moved", last: "a", head: "b", want: []string{"b"}},
		{name: "retry due", last: "a", head: "a", retryAt: now.Add(-time.Second), want: []string{"a"}},
		{name: "retry not due yet", last: "a", head: "a", retryAt: now.Add(time.Minute)},
		{name: "directory", last: "dir:0", head: "", want: []string{"dir:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			e, src := &fakeEngine{}, &fakeSource{head: tt.head}
			l := New(Options{Engine: e, Source: src})
			l.now = func() time.Time { return now }
			l.last, l.retryAt = tt.last, tt.retryAt
			_, err := l.poll(context.Background())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(e.syncs()).To(Equal(tt.want))
		})
	}
}

// TestDriftIsCheckedWhenDue: a drift check starts once the interval has passed
// since the last round began, or at once when a round is unfinished; never before
// the first sync, while one runs, while a retry is due within driftSettle, or when
// the interval is 0.
func TestDriftIsCheckedWhenDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		interval   time.Duration
		lastDrift  time.Time
		synced     bool
		unfinished bool
		running    bool
		retryIn    time.Duration
		want       bool
	}{
		{name: "a retry is due soon", interval: time.Minute, lastDrift: now.Add(-time.Hour), synced: true, retryIn: 2 * time.Second},
		{name: "a retry is overdue", interval: time.Minute, lastDrift: now.Add(-time.Hour), synced: true, retryIn: -time.Second},
		{name: "the next retry is far", interval: time.Minute, lastDrift: now.Add(-time.Hour), synced: true, retryIn: time.Minute, want: true},
		{name: "due", interval: time.Minute, lastDrift: now.Add(-time.Minute), synced: true, want: true},
		{name: "not due", interval: time.Minute, lastDrift: now.Add(-59 * time.Second), synced: true},
		{name: "unfinished round goes on", interval: time.Minute, lastDrift: now, synced: true, unfinished: true, want: true},
		{name: "one is running", interval: time.Minute, lastDrift: now.Add(-time.Hour), synced: true, running: true},
		{name: "never synced", interval: time.Minute},
		{name: "disabled", lastDrift: now.Add(-time.Hour), synced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l := New(Options{DriftInterval: tt.interval})
			l.now = func() time.Time { return now }
			l.lastDrift = tt.lastDrift
			if tt.synced {
				l.rev.SHA = "a"
			}
			if tt.unfinished {
				l.driftChecked = map[string]bool{"a/b": true}
			}
			if tt.running {
				l.drift = &driftRun{}
			}
			if tt.retryIn != 0 {
				l.retryAt = now.Add(tt.retryIn)
			}
			g.Expect(l.driftDue()).To(Equal(tt.want))
		})
	}
}

// TestOnceChecksDriftAfterItsSync: Once checks drift against the revision it synced
// and returns when the check has finished.
func TestOnceChecksDriftAfterItsSync(t *testing.T) {
	g := NewWithT(t)
	e := &fakeEngine{driftKeys: []string{"a/x", "a/y"}}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, DriftInterval: time.Hour})
	_, err := l.Once(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.syncs()).To(Equal([]string{"a"}))
	g.Expect(e.driftChecks()).To(Equal([]string{"a/x@a", "a/y@a"}))
	g.Expect(l.drift).To(BeNil())
}

// TestOnceChecksDriftWhenARetryIsDueSoon: the wait for rechecks to settle belongs
// to the loop; Once checks drift after its sync even when a failed instance's retry
// is due within seconds (no later sync of its own will run).
func TestOnceChecksDriftWhenARetryIsDueSoon(t *testing.T) {
	g := NewWithT(t)
	soon := time.Now().Add(2 * time.Second)
	e := &fakeEngine{driftKeys: []string{"a/x"}, retry: &soon}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, DriftInterval: time.Hour})
	_, err := l.Once(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.driftChecks()).To(Equal([]string{"a/x@a"}))
}

// TestAPushIsSyncedDuringADriftCheck: a drift check of the whole fleet never holds
// a push: the push interrupts the check, its sync runs at once (never at the same
// time as the check), and the round then goes on with the instances not checked
// yet, each checked once.
func TestAPushIsSyncedDuringADriftCheck(t *testing.T) {
	g := NewWithT(t)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("team/i%d", i))
	}
	e := &fakeEngine{driftKeys: keys, driftPause: 200 * time.Millisecond} // a round takes 2 s
	src := &fakeSource{head: "a"}
	l := New(Options{Engine: e, Source: src, Interval: time.Hour, DriftInterval: time.Hour})
	run(t, l)
	g.Eventually(e.driftChecks, 2*time.Second, 10*time.Millisecond).Should(HaveLen(2))

	src.move("b")
	pushed := time.Now()
	l.Push("b")
	g.Eventually(e.syncs, time.Second, 10*time.Millisecond).Should(Equal([]string{"a", "b"}))
	g.Expect(time.Since(pushed)).To(BeNumerically("<", 500*time.Millisecond), "the push waits for no drift check")

	g.Eventually(func() int { return len(e.driftChecks()) }, 4*time.Second, 10*time.Millisecond).Should(Equal(len(keys)))
	g.Consistently(func() int { return len(e.driftChecks()) }, 500*time.Millisecond).Should(Equal(len(keys)), "the round is over")
	var names []string
	afterPush := 0
	for _, c := range e.driftChecks() {
		name, rev, _ := strings.Cut(c, "@")
		names = append(names, name)
		if rev == "b" {
			afterPush++
		}
	}
	g.Expect(names).To(ConsistOf(keys), "each instance is checked once in the round")
	g.Expect(afterPush).To(BeNumerically(">=", 6), "the rest of the round checks the pushed revision")
	e.mu.Lock()
	defer e.mu.Unlock()
	g.Expect(e.overlaps).To(BeZero(), "a sync never runs beside a drift check")
	g.Expect(e.drifts).To(Equal(2), "the interrupted round went on once")
}

// TestADriftReportAskingForASyncSyncsTheUnchangedHead: a drift check that left an
// instance for a sync (the cluster's capabilities changed under a chart) makes the
// loop sync the head it already synced, once.
func TestADriftReportAskingForASyncSyncsTheUnchangedHead(t *testing.T) {
	g := NewWithT(t)
	e := &fakeEngine{driftKeys: []string{"a/x", "a/chart"}, resync: map[string]bool{"a/chart": true}}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, Interval: time.Hour, DriftInterval: time.Hour})
	run(t, l)
	g.Eventually(e.syncs, 2*time.Second, 10*time.Millisecond).Should(Equal([]string{"a", "a"}))
	g.Consistently(e.syncs, 500*time.Millisecond).Should(HaveLen(2))
}

// TestRetryTimerWakesTheLoopWhenDue: the loop's retry timer fires when the earliest
// retry is due, not at the next poll, never sooner than a second, and not at all
// when nothing is to be retried.
func TestRetryTimerWakesTheLoopWhenDue(t *testing.T) {
	g := NewWithT(t)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	l := New(Options{})
	l.armRetry(timer)
	g.Consistently(timer.C, 1500*time.Millisecond).ShouldNot(Receive(), "nothing to retry")

	start := time.Now()
	l.retryAt = start.Add(-time.Minute) // overdue
	l.armRetry(timer)
	g.Eventually(timer.C, 3*time.Second).Should(Receive())
	g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "an overdue retry waits a second, never spins")

	start = time.Now()
	l.retryAt = start.Add(2 * time.Second)
	l.armRetry(timer)
	g.Eventually(timer.C, 4*time.Second).Should(Receive())
	g.Expect(time.Since(start)).To(BeNumerically("~", 2*time.Second, 500*time.Millisecond))
}

// run starts l.Run and stops it at the end of the test.
func run(t *testing.T, l *Loop) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		NewWithT(t).Expect(<-done).To(Succeed())
	})
}

// TestAKickSyncsTheUnchangedHeadAtOnce: a kick (an edit in the cluster) syncs the
// head again although it did not move, long before the next poll.
func TestAKickSyncsTheUnchangedHeadAtOnce(t *testing.T) {
	g := NewWithT(t)
	e := &fakeEngine{}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, Interval: time.Hour})
	run(t, l)
	g.Eventually(e.syncs).Should(Equal([]string{"a"}))
	l.Kick()
	g.Eventually(e.syncs, time.Second).Should(Equal([]string{"a", "a"}))
	g.Consistently(e.syncs, 300*time.Millisecond).Should(HaveLen(2), "nothing else until the next poll")
}

// TestAKickWithTheSourceDownSyncsTheLastRevisionAgain: a kick (a change in the
// cluster: a hold, a rollback, an edit to revert) while the source cannot be read
// syncs the revision synced last again, and the source's failure is recorded; a
// poll with the source down syncs nothing.
func TestAKickWithTheSourceDownSyncsTheLastRevisionAgain(t *testing.T) {
	g := NewWithT(t)
	e, src := &fakeEngine{}, &fakeSource{head: "a"}
	l := New(Options{Engine: e, Source: src, Interval: time.Hour})
	_, err := l.poll(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	src.mu.Lock()
	src.down = fmt.Errorf("connection refused")
	src.mu.Unlock()
	l.retryAt = time.Now().Add(-time.Second) // a retry's poll reads the head ("")
	_, err = l.poll(context.Background())
	g.Expect(err).To(HaveOccurred())
	g.Expect(e.syncs()).To(Equal([]string{"a"}), "a poll with the source down syncs nothing")
	l.resync(context.Background())
	g.Expect(e.syncs()).To(Equal([]string{"a", "a"}), "the kick synced the last revision again")
	e.mu.Lock()
	defer e.mu.Unlock()
	g.Expect(e.sourceFailures).To(Equal(3), "each failed read recorded, the kick's too")
}

// TestAPushPollsAtOnceAndWaitsBrieflyForTheHintedHead: a push polls at once; while
// the mirror does not show the pushed head yet, the loop polls again a few times.
func TestAPushPollsAtOnceAndWaitsBrieflyForTheHintedHead(t *testing.T) {
	g := NewWithT(t)
	e, src := &fakeEngine{}, &fakeSource{head: "a"}
	l := New(Options{Engine: e, Source: src, Interval: time.Hour})
	l.pushPause = 100 * time.Millisecond
	run(t, l)
	g.Eventually(e.syncs).Should(Equal([]string{"a"}))
	l.Push("b")
	g.Eventually(func() int { src.mu.Lock(); defer src.mu.Unlock(); return src.heads }).Should(BeNumerically(">=", 3))
	src.move("b")
	g.Eventually(e.syncs, time.Second).Should(Equal([]string{"a", "b"}))
}

// TestASlowPlanDoesNotDelayAPushSync: while a pull-request plan hangs, a push is
// synced at once, and further requests for a waiting PR coalesce into one plan.
func TestASlowPlanDoesNotDelayAPushSync(t *testing.T) {
	g := NewWithT(t)
	f := &slowForge{release: make(chan struct{})}
	p := NewPlanner(PlannerOptions{Forge: f, Poster: nopPoster{}, MaxPending: 2})
	e, src := &fakeEngine{}, &fakeSource{head: "a"}
	l := New(Options{Engine: e, Source: src, Interval: time.Hour, Planner: p})
	run(t, l)
	g.Eventually(e.syncs).Should(Equal([]string{"a"}))
	p.Enqueue(1)
	g.Eventually(f.reads).Should(Equal([]int{1}), "the plan of PR 1 is under way (and hangs)")

	src.move("b")
	start := time.Now()
	l.Push("b")
	g.Eventually(e.syncs, time.Second).Should(Equal([]string{"a", "b"}))
	g.Expect(time.Since(start)).To(BeNumerically("<", 500*time.Millisecond))

	for range 3 {
		p.Enqueue(2)
	}
	p.Enqueue(3)
	p.Enqueue(4) // beyond MaxPending: dropped until PR 4's next update
	close(f.release)
	g.Eventually(f.reads).Should(Equal([]int{1, 2, 3}))
	g.Consistently(f.reads, 200*time.Millisecond).Should(HaveLen(3))
}

func TestRunNeedsAPositiveInterval(t *testing.T) {
	g := NewWithT(t)
	g.Expect(New(Options{}).Run(context.Background())).To(MatchError("the sync loop needs a positive interval, not 0s"))
}

// TestARefreshReachesTheNextSyncOnce: Registries whose Secrets changed are handed to
// the sync that the refresh starts (sorted, without repeats), and to that one only.
func TestARefreshReachesTheNextSyncOnce(t *testing.T) {
	g := NewWithT(t)
	e := &fakeEngine{}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, Interval: time.Hour})
	run(t, l)
	g.Eventually(e.syncs).Should(HaveLen(1))
	l.Refresh("modules", "charts", "modules")
	g.Eventually(e.refreshes, time.Second).Should(Equal([][]string{nil, {"charts", "modules"}}))
	l.Kick() // within kickGap of the refresh's kick: served once the gap has passed
	g.Eventually(e.refreshes, 3*time.Second).Should(Equal([][]string{nil, {"charts", "modules"}, nil}))
}

// TestAStreamOfKicksSyncsOncePerGap: kicks that come faster than the gap coalesce,
// so a tenant editing its CR in a loop costs one sync per gap, and the last kick is
// never lost.
func TestAStreamOfKicksSyncsOncePerGap(t *testing.T) {
	g := NewWithT(t)
	e := &fakeEngine{}
	l := New(Options{Engine: e, Source: &fakeSource{head: "a"}, Interval: time.Hour})
	l.kickGap = 400 * time.Millisecond
	run(t, l)
	g.Eventually(e.syncs).Should(HaveLen(1))
	begin := time.Now()
	for time.Since(begin) < time.Second {
		l.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	n := func() int { return len(e.syncs()) }
	g.Eventually(n, time.Second).Should(BeNumerically(">=", 3), "kicks are still served, once per gap")
	g.Consistently(n, 500*time.Millisecond).Should(BeNumerically("<=", 5), "about 100 kicks in 1 s: at most one sync per 400 ms gap, and the last one")
}

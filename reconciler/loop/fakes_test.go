package loop

import (
	"context"
	"strings"
	"sync"
	"time"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
)

// fakeEngine records the revisions it is asked to sync and the drift checks.
type fakeEngine struct {
	mu     sync.Mutex
	synced []string
	// refreshed holds each sync's Revision.Refreshed.
	refreshed [][]string
	drifts    int
	// driftKeys are the instances a drift check goes through, driftPause each;
	// checked records each one checked; inDrift is true while a check runs, and
	// overlaps counts the syncs that began while it was true.
	driftKeys  []string
	driftPause time.Duration
	checked    []string
	inDrift    bool
	overlaps   int
	// retry, when set, is the NextRetryAt of a failed instance in every result.
	retry *time.Time
	// resync are the instances ("namespace/name") whose next drift report asks for
	// a sync (once).
	resync map[string]bool
	// sourceFailures counts RecordSourceFailure's calls.
	sourceFailures int
}

func (e *fakeEngine) LastSynced(context.Context) (string, error) { return "", nil }

func (e *fakeEngine) Sync(_ context.Context, rev reconciler.Revision) (*reconciler.SyncResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.synced = append(e.synced, rev.SHA)
	if e.inDrift {
		e.overlaps++
	}
	e.refreshed = append(e.refreshed, rev.Refreshed)
	res := &reconciler.SyncResult{Revision: rev.SHA}
	if e.retry != nil {
		res.Instances = []reconciler.InstanceResult{{Namespace: "a", Name: "b", Action: outcome.ActionFailed, NextRetryAt: e.retry}}
	}
	return res, nil
}

func (e *fakeEngine) RecordSourceFailure(context.Context, string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sourceFailures++
}

// CheckDriftOf checks driftKeys ("namespace/name") in order, driftPause each, and
// stops at once when ctx ends (the instance in flight reports ctx's error).
func (e *fakeEngine) CheckDriftOf(ctx context.Context, rev reconciler.Revision, skip func(string) bool) ([]reconciler.DriftReport, error) {
	e.mu.Lock()
	e.drifts++
	e.inDrift = true
	keys, pause := e.driftKeys, e.driftPause
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.inDrift = false; e.mu.Unlock() }()
	var reports []reconciler.DriftReport
	for _, k := range keys {
		if skip != nil && skip(k) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		ns, name, _ := strings.Cut(k, "/")
		select {
		case <-ctx.Done():
			return append(reports, reconciler.DriftReport{Namespace: ns, Name: name, Err: ctx.Err()}), nil
		case <-time.After(pause):
		}
		e.mu.Lock()
		e.checked = append(e.checked, k+"@"+rev.SHA)
		resync := e.resync[k]
		delete(e.resync, k)
		e.mu.Unlock()
		reports = append(reports, reconciler.DriftReport{Namespace: ns, Name: name, Resync: resync})
	}
	return reports, nil
}

// driftChecks returns the instances checked, each "namespace/name@revision".
func (e *fakeEngine) driftChecks() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.checked...)
}

func (e *fakeEngine) syncs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.synced...)
}

func (e *fakeEngine) refreshes() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]string(nil), e.refreshed...)
}

// fakeSource is a branch whose head the test moves; "" is a directory.
type fakeSource struct {
	mu    sync.Mutex
	head  string
	heads int
	down  error // the source cannot be read: Head fails with it
}

func (s *fakeSource) Head(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heads++
	return s.head, s.down
}

func (s *fakeSource) Read(_ context.Context, head, base string) (reconciler.Revision, error) {
	if head == "" {
		head = "dir:0"
	}
	return reconciler.Revision{SHA: head, Base: base}, nil
}

func (s *fakeSource) move(head string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head = head
}

// slowForge is a forge whose PullRequest blocks until release is closed.
type slowForge struct {
	release chan struct{}
	mu      sync.Mutex
	read    []int
}

func (f *slowForge) SetStatus(context.Context, forge.RepoRef, string, forge.Status) error { return nil }

func (f *slowForge) UpsertPlanComment(context.Context, forge.RepoRef, int, string) error { return nil }

func (f *slowForge) PullRequest(ctx context.Context, _ forge.RepoRef, pr int) (forge.PR, error) {
	f.mu.Lock()
	f.read = append(f.read, pr)
	f.mu.Unlock()
	select {
	case <-f.release:
	case <-ctx.Done():
	}
	return forge.PR{}, context.Canceled // nothing more to plan in these tests
}

func (f *slowForge) reads() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.read...)
}

type nopPoster struct{}

func (nopPoster) PostStatus(forge.RepoRef, string, forge.Status) {}
func (nopPoster) PostPlanComment(forge.RepoRef, int, string)     {}

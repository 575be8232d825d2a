package loop

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
)

// Engine is what the loop needs of reconciler.Engine.
type Engine interface {
	LastSynced(ctx context.Context) (string, error)
	Sync(ctx context.Context, rev reconciler.Revision) (*reconciler.SyncResult, error)
	RecordSourceFailure(ctx context.Context, sha string, err error)
	CheckDriftOf(ctx context.Context, rev reconciler.Revision, skip func(key string) bool) ([]reconciler.DriftReport, error)
}

// Options configure a Loop.
type Options struct {
	// Engine syncs revisions; Source reads them.
	Engine Engine
	Source Source
	// Interval is how often Run polls the branch.
	Interval time.Duration
	// DriftInterval is how often live objects are compared with the last synced
	// revision (0: never; with Once, any positive value checks once after the sync).
	DriftInterval time.Duration
	// Out receives each sync's result, one line per instance (nil: none).
	Out io.Writer
	// Log receives failed syncs and drift checks.
	Log logr.Logger
	// Planner plans pull requests beside the loop while Run runs (nil: none).
	Planner *Planner
}

// Loop is one front end's sync loop. Only one goroutine runs it (Run or Once);
// Kick and Push may be called from any goroutine.
type Loop struct {
	opts   Options
	kicks  *forge.Trigger
	pushes *forge.Trigger

	// sourceFailed and sourceErr say whether the last sync could not read its
	// revision, and why (see resync).
	sourceFailed bool
	sourceErr    error

	mu      sync.Mutex
	hint    string          // the head a push webhook claims (see afterPush)
	refresh map[string]bool // Registries to refresh at the next sync (see Refresh)

	last string // the revision last synced
	// retryAt is when a failure of the last sync is due for a retry of the same
	// revision (zero: nothing to retry); see reconciler.SyncResult.NextRetry.
	retryAt time.Time
	rev     reconciler.Revision // the revision last synced, for drift checks
	// lastDrift is when the last drift round began; driftChecked, when not nil, is
	// the unfinished round's checked instances; drift is the check running (see drift.go).
	lastDrift    time.Time
	driftChecked map[string]bool
	drift        *driftRun
	once         bool // Once is checking drift after its sync (see driftDue)

	now       func() time.Time
	pushPause time.Duration // between attempts of afterPush
	// kickGap is the least time between the starts of two syncs a kick asks for, so
	// that a stream of edits (one tenant annotating its CR in a loop) costs at most one
	// sync, and one request to the forge, per gap; lastKick is when the last began.
	kickGap  time.Duration
	lastKick time.Time
}

// kickGap is Loop.kickGap's default: an edit is still reverted within seconds.
const kickGap = time.Second

// New returns a loop; nothing runs until Run or Once.
func New(opts Options) *Loop {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Loop{opts: opts, kicks: forge.NewTrigger(), pushes: forge.NewTrigger(), now: time.Now, pushPause: time.Second, kickGap: kickGap}
}

// Kick asks for a sync of the branch head now, even when it has not moved (the
// cluster changed: an edited CR, a rotated Secret, `cairn reconcile source`).
// Kicks coalesce; Kick never blocks.
func (l *Loop) Kick() { l.kicks.Fire() }

// Refresh asks for a sync now in which the instances that use one of registries
// render and verify again: a Secret or ConfigMap they name (credentials, cosign
// keys, CA bundle) changed in the cluster. Requests add up until a sync handles
// them; Refresh never blocks.
func (l *Loop) Refresh(registries ...string) {
	l.addRefresh(registries)
	l.kicks.Fire()
}

// takeRefresh returns the Registries to refresh, sorted, and forgets them.
func (l *Loop) takeRefresh() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := slices.Sorted(maps.Keys(l.refresh))
	l.refresh = nil
	return names
}

// Push says a verified push webhook claims the branch moved to hint (a hint only:
// the loop reads the head itself). Pushes coalesce; Push never blocks.
func (l *Loop) Push(hint string) {
	l.mu.Lock()
	l.hint = hint
	l.mu.Unlock()
	l.pushes.Fire()
}

// Once syncs the head once, then checks drift when DriftInterval is positive and the
// revision could be used. The result is nil when nothing could be synced.
func (l *Loop) Once(ctx context.Context) (*reconciler.SyncResult, error) {
	res, err := l.sync(ctx, "")
	if res != nil {
		PrintResult(l.opts.Out, res)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("sync interrupted: %w", context.Cause(ctx))
	}
	if err != nil {
		return res, err
	}
	if res.Error == nil {
		l.once = true
		l.startDrift(ctx)
		if err := l.waitDrift(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Run polls every Interval until ctx ends, at once when pushed or kicked, and when
// the earliest retry of a failed instance is due (even if that falls between two
// polls). An unchanged branch with nothing to retry costs one ls-remote and nothing
// else. Drift checks run beside it (see drift.go), and so does the Planner, if any,
// until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	if l.opts.Interval <= 0 {
		return fmt.Errorf("the sync loop needs a positive interval, not %s", l.opts.Interval)
	}
	if l.opts.Planner != nil {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); l.opts.Planner.Run(ctx) }()
		defer wg.Wait()
	}
	t := time.NewTicker(l.opts.Interval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	kicked := time.NewTimer(time.Hour) // a kick that came within kickGap of the last
	kicked.Stop()
	defer l.stopDrift()
	l.step(ctx)
	for {
		l.armRetry(retry) // after every step, the first one too
		l.startDrift(ctx)
		select {
		case <-ctx.Done():
			return nil
		case res := <-l.driftDone():
			l.endDrift(res)
		case <-t.C:
			l.step(ctx)
		case <-retry.C:
			l.step(ctx)
		case <-l.kicks.C():
			if wait := l.kickGap - l.now().Sub(l.lastKick); wait > 0 {
				kicked.Reset(wait) // kicks meanwhile coalesce into this one
				continue
			}
			l.kickSync(ctx)
		case <-kicked.C:
			l.kickSync(ctx)
		case <-l.pushes.C():
			l.afterPush(ctx)
		}
	}
}

// kickSync syncs for a kick and notes when it began.
func (l *Loop) kickSync(ctx context.Context) {
	l.lastKick = l.now()
	l.resync(ctx)
}

// armRetry sets timer to fire when the next retry is due (never when none is), at
// least a second from now, so that a retry that failed early never spins.
func (l *Loop) armRetry(timer *time.Timer) {
	timer.Stop()
	if !l.retryAt.IsZero() {
		timer.Reset(max(l.retryAt.Sub(l.now()), time.Second))
	}
}

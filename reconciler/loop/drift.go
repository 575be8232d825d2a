package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"cairn.dev/cairn/reconciler"
)

// A drift check compares every instance's live objects with the last synced
// revision. It runs beside the loop, so that a push or an edit is synced at once
// and not after a check of the whole fleet; a sync interrupts it (the two never
// write at the same time), and after the sync the round goes on with the instances
// it had not checked yet, so frequent pushes never starve the last ones.

// driftRun is a drift check in flight.
type driftRun struct {
	cancel context.CancelFunc
	done   chan driftResult // receives once, when the check has stopped
}

type driftResult struct {
	rev         reconciler.Revision
	reports     []reconciler.DriftReport
	err         error
	interrupted bool // a sync (or the end of the loop) stopped it
}

// driftSettle: a drift check does not start while a retry or a health recheck is
// due within it, as after a first sync whose workloads are still starting: the
// recheck would only interrupt it, and both would load the API server at once.
const driftSettle = 10 * time.Second

// driftDue reports whether a drift check should start: none is running, no retry
// is due within driftSettle (Once checks whatever is due: no later sync would
// interrupt it), and a round is unfinished or the interval has passed
// since the last round began.
func (l *Loop) driftDue() bool {
	if l.rev.SHA == "" || l.opts.DriftInterval <= 0 || l.drift != nil {
		return false
	}
	if !l.once && !l.retryAt.IsZero() && l.retryAt.Sub(l.now()) < driftSettle {
		return false
	}
	return l.driftChecked != nil || l.now().Sub(l.lastDrift) >= l.opts.DriftInterval
}

// startDrift starts a drift check, or goes on with the unfinished round, when due.
func (l *Loop) startDrift(ctx context.Context) {
	if !l.driftDue() {
		return
	}
	if l.driftChecked == nil {
		l.lastDrift, l.driftChecked = l.now(), map[string]bool{}
	}
	checked := maps.Clone(l.driftChecked)
	l.opts.Log.Info("drift check started", "revision", l.rev.SHA, "alreadyChecked", len(checked))
	dctx, cancel := context.WithCancel(ctx)
	run := &driftRun{cancel: cancel, done: make(chan driftResult, 1)}
	rev := l.rev
	go func() {
		defer cancel()
		reports, err := l.opts.Engine.CheckDriftOf(dctx, rev, func(key string) bool { return checked[key] })
		run.done <- driftResult{rev: rev, reports: reports, err: err, interrupted: dctx.Err() != nil}
	}()
	l.drift = run
}

// driftDone is the running check's result channel (nil, never ready, when none runs).
func (l *Loop) driftDone() <-chan driftResult {
	if l.drift == nil {
		return nil
	}
	return l.drift.done
}

// stopDrift interrupts the running check, if any, and waits until it has stopped:
// each instance in flight stops at its next request.
func (l *Loop) stopDrift() {
	if l.drift == nil {
		return
	}
	l.drift.cancel()
	l.endDrift(<-l.drift.done)
}

// waitDrift waits for the running check, if any, to finish; its error is the
// check's own (not an instance's).
func (l *Loop) waitDrift() error {
	if l.drift == nil {
		return nil
	}
	res := <-l.drift.done
	l.endDrift(res)
	return res.err
}

// endDrift reports a check that has stopped and keeps the round's progress: an
// interrupted round goes on later without the instances it has checked; one that
// ran to its end is over until the next interval.
func (l *Loop) endDrift(res driftResult) {
	l.drift = nil
	if !res.interrupted {
		l.driftChecked = nil
		if res.err != nil {
			l.opts.Log.Error(res.err, "drift check failed", "revision", res.rev.SHA)
		}
		for _, r := range res.reports {
			printDrift(l, res.rev.SHA, r)
		}
		l.kickForResync(res.reports)
		l.opts.Log.Info("drift check finished", "revision", res.rev.SHA, "checked", len(res.reports), "drifted", countDrifted(res.reports))
		return
	}
	checked := 0
	for _, r := range res.reports {
		if r.Err != nil && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
			continue // cut short: checked again when the round goes on
		}
		l.driftChecked[r.Namespace+"/"+r.Name] = true
		checked++
		printDrift(l, res.rev.SHA, r)
	}
	l.opts.Log.Info("drift check interrupted", "revision", res.rev.SHA, "checked", checked, "roundChecked", len(l.driftChecked))
}

// kickForResync asks for a sync when a drift check left an instance for a sync to
// render again (the cluster's capabilities changed under a chart instance).
func (l *Loop) kickForResync(reports []reconciler.DriftReport) {
	for _, r := range reports {
		if r.Resync {
			l.opts.Log.Info("the cluster's capabilities changed under a chart instance: syncing", "instance", r.Namespace+"/"+r.Name)
			l.kicks.Fire()
			return
		}
	}
}

func countDrifted(reports []reconciler.DriftReport) int {
	n := 0
	for _, r := range reports {
		if len(r.Drifted) > 0 {
			n++
		}
	}
	return n
}

func printDrift(l *Loop, sha string, r reconciler.DriftReport) {
	key := r.Namespace + "/" + r.Name
	switch {
	case r.Err != nil:
		l.opts.Log.Error(r.Err, "drift check failed", "instance", key, "revision", sha)
	case len(r.Drifted) > 0:
		fmt.Fprintf(l.opts.Out, "  %-40s drift (%s): %d object(s), %d corrected: %v\n",
			key, r.Policy, len(r.Drifted), r.Corrected, r.Drifted)
	}
	if r.Err == nil && len(r.Rotated) > 0 {
		fmt.Fprintf(l.opts.Out, "  %-40s rotated generated Secrets: %v\n", key, r.Rotated)
	}
}

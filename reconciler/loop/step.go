package loop

import (
	"context"
	"time"

	"cairn.dev/cairn/reconciler"
)

// step polls once (Run starts a drift check after it when one is due).
func (l *Loop) step(ctx context.Context) *reconciler.SyncResult {
	res, err := l.poll(ctx)
	l.report(res, err)
	return res
}

// resync syncs the branch head whether or not it moved: the cluster changed.
func (l *Loop) resync(ctx context.Context) {
	res, err := l.sync(ctx, "")
	if err != nil && res == nil && l.rev.SHA != "" && l.sourceFailed {
		// A change in the cluster (an edit to revert, a hold, a rollback) while the
		// source cannot be read: the last synced revision is synced again, from the
		// tree this process holds (a rollback from a published render needs no Git).
		// The source's failure stays recorded on the Platform.
		l.opts.Log.Info("the source cannot be read: syncing the last synced revision again for a change in the cluster",
			"revision", l.rev.SHA, "error", err.Error())
		res, err = l.opts.Engine.Sync(ctx, l.rev)
		l.opts.Engine.RecordSourceFailure(ctx, "", l.sourceErr)
	}
	l.report(res, err)
}

func (l *Loop) report(res *reconciler.SyncResult, err error) {
	if res != nil {
		PrintResult(l.opts.Out, res)
	}
	if err != nil {
		l.opts.Log.Error(err, "sync failed", "revision", l.last)
	}
}

// afterPush polls at once. The payload's SHA is never trusted: the loop reads the
// head itself; when the pushed commit is not visible yet (a mirror that lags), it
// retries briefly and then leaves it to the next poll.
func (l *Loop) afterPush(ctx context.Context) {
	l.mu.Lock()
	hint := l.hint
	l.hint = ""
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		before := l.last
		l.step(ctx)
		if hint == "" || l.last == hint || l.last != before || attempt == 4 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.pushPause):
		}
	}
}

// poll syncs when the branch moved or a retry is due; a failed instance is retried
// on its own schedule, never by re-running the whole revision at every poll.
func (l *Loop) poll(ctx context.Context) (*reconciler.SyncResult, error) {
	head := ""
	if l.last != "" && !reconciler.RetryDue(l.retryAt, l.now()) {
		h, err := l.opts.Source.Head(ctx)
		if err != nil {
			return nil, err // the Platform keeps the last sync's state; the next poll tries again
		}
		if h != "" && h == l.last {
			return nil, nil
		}
		head = h
	}
	return l.sync(ctx, head)
}

// sync reads head (resolved here when "") and syncs it.
func (l *Loop) sync(ctx context.Context, head string) (*reconciler.SyncResult, error) {
	refresh := l.takeRefresh()
	rev, err := l.revision(ctx, head)
	l.sourceFailed, l.sourceErr = err != nil, err
	if err != nil {
		l.addRefresh(refresh) // for the next sync
		l.opts.Engine.RecordSourceFailure(ctx, rev.SHA, err)
		return nil, err
	}
	rev.Refreshed = refresh
	l.stopDrift() // the drift check goes on after this sync
	res, err := l.opts.Engine.Sync(ctx, rev)
	if res == nil || res.Error != nil || res.Interrupted {
		l.addRefresh(refresh)
	} else {
		l.addRefresh(res.Unrefreshed) // an input that could not be written: refreshed again next time
	}
	if res == nil {
		l.retryAt = l.now().Add(5 * time.Second) // the cluster could not be used: try again soon
		return nil, err
	}
	l.last, l.retryAt, l.rev = res.Revision, res.NextRetry(), rev
	return res, err
}

func (l *Loop) revision(ctx context.Context, head string) (reconciler.Revision, error) {
	if head == "" {
		h, err := l.opts.Source.Head(ctx)
		if err != nil {
			return reconciler.Revision{}, err
		}
		head = h
	}
	base, err := l.opts.Engine.LastSynced(ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	return l.opts.Source.Read(ctx, head, base)
}

// addRefresh adds Registries to refresh at the next sync (also those of a sync
// that did not handle its instances; the sync's own retry wakes the loop then).
func (l *Loop) addRefresh(names []string) {
	if len(names) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refresh == nil {
		l.refresh = map[string]bool{}
	}
	for _, n := range names {
		l.refresh[n] = true
	}
}

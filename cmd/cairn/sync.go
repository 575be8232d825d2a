package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
)

func newSyncCommand(kube *kubeFlags) *cobra.Command {
	var (
		repo     repoFlags
		forgeF   forgeFlags
		logF     logFlags
		once     bool
		interval time.Duration
		drift    time.Duration
		quiet    bool
		lockWait time.Duration
		health   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Reconcile the cluster to the repository: once, or every --interval",
		Example: `  cairn sync --repo ./platform --once
  cairn sync --repo https://git.example.com/platform.git --branch main --interval 1m
  cairn sync --repo https://gitea.example.com/ops/platform.git --interval 10m \
    --forge gitea --forge-url https://gitea.example.com --forge-token-file /var/run/cairn/token \
    --listen :8080 --webhook-secret-file /var/run/cairn/webhook-secret`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once && interval <= 0 {
				return fmt.Errorf("give --once or a positive --interval")
			}
			if once && forgeF.listen != "" {
				return fmt.Errorf("--listen needs --interval: a webhook wakes a running sync loop")
			}
			log, err := logF.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx := logr.NewContext(cmd.Context(), log)
			fw, err := newForgeWiring(&forgeF, &repo, log)
			if err != nil {
				return err
			}
			defer fw.close()
			var progress io.Writer
			if !quiet {
				progress = logF.progressWriter(cmd.ErrOrStderr(), log)
			}
			if !cmd.Flags().Changed("health-wait") {
				health = loopHealthWait
				if once {
					health = 0 // a one-off sync reports each instance's final health
				}
			}
			e, closeFn, err := engine(kube, &repo, progress, fw.reporter(), log,
				func(o *reconciler.Options) { o.HealthWait = health })
			if err != nil {
				return err
			}
			defer closeFn()
			s := &syncer{engine: e, repo: &repo, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), log: log, driftEvery: drift, forge: fw}
			if once && !cmd.Flags().Changed("drift-interval") {
				s.driftEvery = 0 // a one-off sync checks drift only when asked
			}
			return syncLease(ctx, kube, &repo, lockWait, log, func(ctx context.Context) error {
				if once {
					return s.once(ctx)
				}
				if err := fw.listen(ctx); err != nil {
					return err
				}
				return s.loop(ctx, interval)
			})
		},
	}
	repo.register(cmd, false)
	forgeF.register(cmd)
	logF.register(cmd)
	cmd.Flags().BoolVar(&once, "once", false, "sync once and exit (non-zero when an instance failed)")
	cmd.Flags().DurationVar(&interval, "interval", 0, "poll the branch at this interval until interrupted")
	cmd.Flags().DurationVar(&drift, "drift-interval", 10*time.Minute,
		"how often live objects are compared with Git (spec.drift: Correct re-applies, Warn reports); with --once, any positive value checks once after the sync")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	cmd.Flags().DurationVar(&health, "health-wait", loopHealthWait,
		"longest a sync waits for one instance's objects to become Current before it reports the instance Progressing and moves on (a later poll checks again, until the instance's timeout); 0 waits the whole timeout; with --once the default is 0")
	cmd.Flags().DurationVar(&lockWait, "lock-timeout", time.Minute,
		"how long to wait for another sync of the cluster (the holder of the Lease cairn-sync in cairn's namespace) before failing")
	return cmd
}

// loopHealthWait is how long a sync loop waits in line for an instance's health: a
// Deployment rolled out on a healthy cluster is seen Current well within it, and a
// stuck one never holds back the next poll for longer.
const loopHealthWait = 10 * time.Second

type syncer struct {
	engine *reconciler.Engine
	repo   *repoFlags
	src    *gitsource.Source
	forge  *forgeWiring
	out    io.Writer
	errOut io.Writer
	log    logr.Logger // diagnostics: failed syncs and drift checks
	last   string
	// retryAt is when a failure of the last sync is due for a retry of the same
	// revision (zero: nothing to retry); see reconciler.SyncResult.NextRetry.
	retryAt time.Time

	driftEvery time.Duration
	lastDrift  time.Time
	rev        reconciler.Revision
	// kicks asks for a sync now, even when the branch has not moved (the controller's
	// watch of edited ModuleInstances); nil in the CLI.
	kicks chan struct{}
}

func (s *syncer) once(ctx context.Context) error {
	res, err := s.sync(ctx)
	if res != nil {
		printSyncResult(s.out, res)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sync interrupted: %w", context.Cause(ctx))
	}
	if err != nil {
		return err
	}
	if s.driftEvery > 0 && res.Error == nil {
		if err := s.checkDrift(ctx); err != nil {
			return err
		}
	}
	if res.Failed() {
		return errInstancesFailed
	}
	return nil
}

// checkDrift compares the live objects with the last synced revision.
func (s *syncer) checkDrift(ctx context.Context) error {
	s.lastDrift = time.Now()
	reports, err := s.engine.CheckDrift(ctx, s.rev)
	if err != nil {
		return err
	}
	for _, r := range reports {
		switch {
		case r.Err != nil:
			s.log.Error(r.Err, "drift check failed", "instance", r.Namespace+"/"+r.Name, "revision", s.rev.SHA)
		case len(r.Drifted) > 0:
			fmt.Fprintf(s.out, "  %-40s drift (%s): %d object(s), %d corrected: %v\n",
				r.Namespace+"/"+r.Name, r.Policy, len(r.Drifted), r.Corrected, r.Drifted)
		}
		if r.Err == nil && len(r.Rotated) > 0 {
			fmt.Fprintf(s.out, "  %-40s rotated generated Secrets: %v\n", r.Namespace+"/"+r.Name, r.Rotated)
		}
	}
	return nil
}

// loop polls until ctx ends, at once when a webhook says the branch moved or a
// pull request changed, and when the earliest retry of a failed instance is due
// (even if that falls between two polls). An unchanged branch with nothing to retry
// costs one ls-remote and nothing else.
func (s *syncer) loop(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	s.step(ctx)
	for {
		s.armRetry(retry) // after every step, the first one too
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.step(ctx)
		case <-retry.C:
			s.step(ctx)
		case <-s.kicks:
			s.resync(ctx)
		case <-s.forge.pushes():
			s.afterPush(ctx)
		case pr := <-s.forge.pullRequests():
			s.forge.plan(ctx, s.engine, s.repo, pr)
		}
	}
}

// resync syncs the branch head whether or not it moved: the cluster changed.
func (s *syncer) resync(ctx context.Context) {
	res, err := s.sync(ctx)
	if res != nil {
		printSyncResult(s.out, res)
	}
	if err != nil {
		s.log.Error(err, "sync failed", "revision", s.last)
	}
}

// armRetry sets timer to fire when the next retry is due (never when none is), at
// least a second from now, so that a retry that failed early never spins.
func (s *syncer) armRetry(timer *time.Timer) {
	timer.Stop()
	if !s.retryAt.IsZero() {
		timer.Reset(max(time.Until(s.retryAt), time.Second))
	}
}

// step polls once, then checks drift when it is due.
func (s *syncer) step(ctx context.Context) *reconciler.SyncResult {
	res, err := s.poll(ctx)
	if res != nil {
		printSyncResult(s.out, res)
	}
	if err != nil {
		s.log.Error(err, "sync failed", "revision", s.last)
	}
	if s.rev.Tree != nil && s.driftEvery > 0 && time.Since(s.lastDrift) >= s.driftEvery {
		if err := s.checkDrift(ctx); err != nil {
			s.log.Error(err, "drift check failed", "revision", s.rev.SHA)
		}
	}
	return res
}

// afterPush polls at once. The payload's SHA is never trusted: cairn reads the head
// itself; when the pushed commit is not visible yet (a mirror that lags), it retries
// briefly and then leaves it to the next poll.
func (s *syncer) afterPush(ctx context.Context) {
	hint := s.forge.pushHint()
	for attempt := 0; ; attempt++ {
		before := s.last
		s.step(ctx)
		if hint == "" || s.last == hint || s.last != before || attempt == 4 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// poll syncs when the branch moved or a retry is due; a failed instance is retried
// on its own schedule, never by re-running the whole revision at every poll.
func (s *syncer) poll(ctx context.Context) (*reconciler.SyncResult, error) {
	if !s.repo.isDir() && s.last != "" && !reconciler.RetryDue(s.retryAt, time.Now()) {
		head, err := s.head(ctx)
		if err != nil {
			return nil, err
		}
		if head == s.last {
			return nil, nil
		}
	}
	return s.sync(ctx)
}

func (s *syncer) head(ctx context.Context) (string, error) {
	if s.src == nil {
		src, err := s.repo.source()
		if err != nil {
			return "", err
		}
		s.src = src
	}
	return s.repo.resolve(ctx, s.src)
}

func (s *syncer) sync(ctx context.Context) (*reconciler.SyncResult, error) {
	rev, err := s.revision(ctx)
	if err != nil {
		s.engine.RecordSourceFailure(ctx, rev.SHA, err)
		return nil, err
	}
	res, err := s.engine.Sync(ctx, rev)
	if res == nil {
		s.retryAt = time.Now().Add(5 * time.Second) // the cluster could not be used: try again soon
		return nil, err
	}
	s.last, s.retryAt, s.rev = res.Revision, res.NextRetry(), rev
	return res, err
}

func (s *syncer) revision(ctx context.Context) (reconciler.Revision, error) {
	if s.repo.isDir() {
		return s.repo.readDir()
	}
	base, err := s.engine.LastSynced(ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	head, err := s.head(ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	return reconciler.ReadRevision(ctx, s.src, head, base)
}

func printSyncResult(w io.Writer, res *reconciler.SyncResult) {
	if res.Error != nil {
		fmt.Fprintf(w, "revision %s not synced: %v\n", res.Revision, res.Error)
		return
	}
	if res.Interrupted {
		fmt.Fprintf(w, "sync of revision %s interrupted\n", res.Revision)
	} else {
		fmt.Fprintf(w, "synced revision %s\n", res.Revision)
	}
	for _, i := range res.Instances {
		fmt.Fprintf(w, "  %-40s %-9s %s\n", i.Namespace+"/"+i.Name, i.Action, i.Message)
		for _, warning := range i.Warnings {
			fmt.Fprintf(w, "  %-40s warning: %s\n", "", warning)
		}
	}
}

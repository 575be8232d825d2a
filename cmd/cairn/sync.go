package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/plans"
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
			rec, err := newEventRecorder(kube)
			if err != nil {
				return err
			}
			defer rec.Flush(eventFlushWait)
			src, err := repo.loopSource()
			if err != nil {
				return err
			}
			e, closeFn, err := engine(kube, &repo, progress, fw.reporter(), log,
				func(o *reconciler.Options) { o.HealthWait, o.Events, o.Revisions = health, rec, revisionsOf(src) })
			if err != nil {
				return err
			}
			defer closeFn()
			if !once { // one sync's waits are cheaper by GET than a LIST of every workload
				if err := e.WatchHealth(ctx); err != nil {
					return err
				}
			}
			if once && !cmd.Flags().Changed("drift-interval") {
				drift = 0 // a one-off sync checks drift only when asked
			}
			store, err := planStore(kube, repo.namespace)
			if err != nil {
				return err
			}
			l := loop.New(loop.Options{Engine: e, Source: src, Interval: interval, DriftInterval: drift,
				Out: cmd.OutOrStdout(), Log: log, Planner: fw.plannerKeeping(e, store)})
			return syncLease(ctx, kube, &repo, lockWait, log, func(ctx context.Context) error {
				if once {
					return syncOnce(ctx, l)
				}
				if err := fw.listen(l); err != nil {
					return err
				}
				if err := watchRequests(ctx, kube, l.Kick); err != nil {
					return err
				}
				return l.Run(ctx)
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

// syncOnce runs one sync; it fails when an instance failed.
func syncOnce(ctx context.Context, l *loop.Loop) error {
	res, err := l.Once(ctx)
	if err != nil {
		return err
	}
	if res.Failed() {
		return errInstancesFailed
	}
	return nil
}

// planStore keeps pull requests' plans in Secrets of cairn's namespace, for the
// dashboard.
func planStore(kube *kubeFlags, namespace string) (*plans.Store, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: reconciler.Scheme})
	if err != nil {
		return nil, err
	}
	return &plans.Store{Client: c, Namespace: namespace}, nil
}

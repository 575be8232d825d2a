package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/lease"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/reconciler/report"
)

// controllerFlags are the manager's flags, named as kubebuilder names them.
type controllerFlags struct {
	leaderElect   bool
	leaderNS      string
	metricsAddr   string
	probeAddr     string
	pprofAddr     string
	webhookAddr   string
	interval      time.Duration
	drift         time.Duration
	healthWait    time.Duration
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	shards        int
	concurrent    int
	render        renderFlags
	renderer      rendertask.JobOptions
	dashboard     dashboardFlags
}

func (f *controllerFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader among the replicas (the Lease cairn-sync, which `cairn sync` also takes): only the leader polls and syncs")
	fl.StringVar(&f.leaderNS, "leader-election-namespace", "", "the Lease's namespace (default: $POD_NAMESPACE, else cairn-system)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "where /metrics is served (0 disables it)")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "where /healthz and /readyz are served (0 disables them)")
	fl.StringVar(&f.pprofAddr, "pprof-bind-address", "", "where Go's /debug/pprof/ profiles are served (empty: not served; bind it to localhost, the profiles are not authenticated)")
	fl.StringVar(&f.webhookAddr, "webhook-bind-address", "", "serve the forges' webhooks here on every replica (POST /hooks/<forge>; needs --webhook-secret-file): a verified push makes the leader sync at once, passed on through the Platform's reconcile request when it reaches another replica; \"\" disables it")
	fl.DurationVar(&f.interval, "interval", time.Minute, "how often the branch is polled")
	fl.DurationVar(&f.drift, "drift-interval", 10*time.Minute, "how often live objects are compared with Git")
	fl.DurationVar(&f.healthWait, "health-wait", loopHealthWait, "longest a sync waits in line for one instance's objects to become Current")
	fl.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a leader's Lease is valid without renewal")
	fl.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries a renewal before it steps down")
	fl.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often a replica tries to take or renew the Lease")
	fl.IntVar(&f.shards, "shards", 1, "divide the instances into this many shards (Leases cairn-shard-<i>) spread over the replicas, each replica reconciling the instances of the shards it holds from their CRs on its queue; 0: the leader reconciles every instance in its sync (the default, and the only mode, with a directory as --repo)")
	fl.IntVar(&f.concurrent, "concurrent", 0, "instance reconciles at once in each replica with --shards (0: twice the engine's apply slots, as a reconcile waiting for health gives its slot back)")
	f.render.register(cmd)
	fl.StringVar(&f.renderer.Image, "renderer-image", "", "the image of render Jobs (Platform render.mode: Job); the Deployment passes its own")
	fl.StringSliceVar(&f.renderer.Command, "renderer-command", []string{"/cairn"}, "the command of render Jobs' container")
	fl.StringSliceVar(&f.renderer.Args, "renderer-args", []string{"render-task"}, "the arguments of render Jobs' container, before the paths cairn adds")
	fl.StringSliceVar(&f.renderer.ImagePullSecrets, "renderer-image-pull-secrets", nil, "Secrets of cairn's namespace render Jobs pull their image with")
	fl.Int32Var(&f.renderer.BackoffLimit, "renderer-backoff-limit", 0, "render Jobs' backoffLimit (a failed render is retried by the instance's own retry)")
	fl.StringVar(&f.renderer.CPU, "renderer-cpu", "", "render Jobs' CPU request and limit (empty: none; memory is the render's budget, limits.renderMemory)")
	fl.StringVar(&f.renderer.CAConfigMap, "renderer-ca-configmap", "", "a ConfigMap of cairn's namespace whose ca.crt render Jobs trust for every registry (beside each Registry's CA)")
	fl.DurationVar(&f.renderer.FailedJobTTL, "renderer-failed-job-ttl", rendertask.DefaultFailedJobTTL, "how long a failed render Job and its config Secret stay")
	fl.StringVar(&f.dashboard.addr, "dashboard-bind-address", "0", "where the dashboard is served, on every replica (users log in with a bearer token; cairn install serves it on :8090; 0 disables it)")
	fl.BoolVar(&f.dashboard.anonymousRead, "dashboard-anonymous-read", false, "let requests without a token read the whole dashboard (never act)")
	f.dashboard.registerCommitURL(cmd)
}

// leaderNamespace is --leader-election-namespace, else $POD_NAMESPACE, else cairn's.
func (f *controllerFlags) leaderNamespace() string {
	switch {
	case f.leaderNS != "":
		return f.leaderNS
	case os.Getenv("POD_NAMESPACE") != "":
		return os.Getenv("POD_NAMESPACE")
	}
	return reconciler.DefaultNamespace
}

func newControllerCommand(kube *kubeFlags) *cobra.Command {
	var (
		repo   repoFlags
		forgeF forgeFlags
		logF   logFlags
		cf     controllerFlags
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run cairn in the cluster: a leader-elected manager that polls the repository and syncs it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logF.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctrl.SetLogger(log)
			return runController(logr.NewContext(cmd.Context(), log), cmd, kube, &repo, &forgeF, &cf, log)
		},
	}
	repo.register(cmd, false)
	forgeF.register(cmd)
	logF.register(cmd)
	cf.register(cmd)
	_ = cmd.Flags().MarkDeprecated("listen", "use --webhook-bind-address, served on every replica")
	return cmd
}

func runController(ctx context.Context, cmd *cobra.Command, kube *kubeFlags, repo *repoFlags, forgeF *forgeFlags,
	cf *controllerFlags, log logr.Logger) error {
	if cf.interval <= 0 {
		return fmt.Errorf("--interval must be positive")
	}
	if cf.shards < 0 || cf.concurrent < 0 {
		return fmt.Errorf("--shards and --concurrent may not be negative")
	}
	cf.shards = cf.shardsFor(repo.isDir(), cmd.Flags().Changed("shards"))
	if cf.webhookAddr == "" {
		cf.webhookAddr = forgeF.listen
	}
	limit := cgroupMemoryLimit(os.DirFS("/"))
	sizing, err := cf.render.sizing(limit, log)
	if err != nil {
		return err
	}
	limitOwnMemory(limit, sizing, log)
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	opts, err := managerOptions(cf, cfg, repo.namespace)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("failed to create the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	fw, err := newForgeWiring(forgeF, repo, log)
	if err != nil {
		return err
	}
	defer fw.close()
	metrics, err := report.NewMetricsReporter(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("failed to register cairn's metrics: %w", err)
	}
	src, err := repo.loopSource()
	if err != nil {
		return err
	}
	e, closeFn, err := engineWith(rendererOptions(sizing), kube, repo, &logLineWriter{log: log.WithName("progress")}, fw.reporter(), log,
		func(o *reconciler.Options) {
			o.HealthWait, o.Metrics, o.RenderJob = cf.healthWait, metrics, cf.renderer
			o.Revisions = revisionsOf(src)
			o.Events = mgr.GetEventRecorder(report.EventReportingController)
			o.Sharded = cf.shards > 0
			if o.Sharded {
				o.Instances = mgr.GetClient() // the informer cache: a LIST of the CRs every poll costs nothing
			}
		})
	if err != nil {
		return err
	}
	defer closeFn()
	if err := e.WatchHealth(ctx); err != nil {
		return err
	}
	recent := &loop.Recent{Source: src}           // the instance reconciles read the leader's revisions from it
	store, err := planStore(kube, repo.namespace) // uncached: Secrets of cairn's namespace only
	if err != nil {
		return err
	}
	l := loop.New(loop.Options{Engine: e, Source: recent, Interval: cf.interval, DriftInterval: cf.drift,
		Out: cmd.OutOrStdout(), Log: log, Planner: fw.plannerKeeping(e, store)})
	if err := watchEdits(mgr, l.Kick, e.KeepInventoryOfDeleted, log); err != nil {
		return err
	}
	if cf.shards > 0 {
		if cf.concurrent <= 0 {
			// Twice the engine's apply slots: a reconcile waiting for its
			// objects' health gives its apply slot back but keeps its worker, so as many
			// workers as slots left the slots idle (at 1000 instances the workers, not
			// the slots or the API server, bounded the first half of a cold fleet). Renders
			// still queue for the render workers, whose memory is bounded apart.
			cf.concurrent = 2 * reconciler.DefaultOptions().ApplyConcurrency
		}
		if err := startInstanceReconciles(ctx, mgr, cfg, e, repo, recent, cf, log); err != nil {
			return err
		}
	}
	if err := watchRegistrySecrets(ctx, mgr, repo.namespace, l.Refresh, log.WithName("registry-secrets")); err != nil {
		return err
	}
	hooks := newControllerHooks(fw, cf.webhookAddr, l, mgr.GetClient(), log)
	if err := mgr.Add(hooks); err != nil {
		return err
	}
	if err := watchPlanRequests(mgr, fw, log.WithName("plan-requests")); err != nil {
		return err
	}
	if err := serveControllerDashboard(ctx, mgr, cfg, &cf.dashboard, repo, log.WithName("dashboard")); err != nil {
		return err
	}
	signalled := ctx // ended by SIGTERM or an interrupt (see main)
	// A runnable needs the Lease by default: only the leader polls and syncs.
	poll := func(ctx context.Context) error {
		log.Info("leading: polling the repository", "interval", cf.interval.String())
		return hooks.lead(ctx, l.Run)
	}
	err = mgr.Add(manager.RunnableFunc(func(runCtx context.Context) error {
		// The leader's sync stops when the process is told to (SIGTERM), with the
		// instance reconciles: the manager ends its leader-election runnables only
		// after the others, and a sync still waiting for the instances' attempts
		// would take their interrupted outcomes for the revision's and record it as
		// synced rather than interrupted.
		ctx, cancel := context.WithCancelCause(runCtx)
		defer cancel(nil)
		defer context.AfterFunc(signalled, func() { cancel(context.Cause(signalled)) })()
		if cf.leaderElect {
			return poll(ctx)
		}
		// Without leader election the sync Lease still keeps `cairn sync` and other
		// replicas out: this one waits for it as long as it runs.
		return syncLease(ctx, kube, repo, 365*24*time.Hour, log, poll)
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// shardsFor is --shards as given, or its default: one shard, but none (the leader
// reconciles every instance in its sync) for a directory, as replicas read each
// instance's revision by its SHA and a directory has none.
func (f *controllerFlags) shardsFor(dir, given bool) int {
	if dir && !given {
		return 0
	}
	return f.shards
}

func managerOptions(cf *controllerFlags, cfg *rest.Config, namespace string) (manager.Options, error) {
	opts := manager.Options{
		Scheme:                        reconciler.Scheme,
		Cache:                         namespaceCache(namespace),
		Metrics:                       metricsserver.Options{BindAddress: cf.metricsAddr},
		HealthProbeBindAddress:        cf.probeAddr,
		PprofBindAddress:              cf.pprofAddr,
		LeaderElection:                cf.leaderElect,
		LeaderElectionID:              lease.Name,
		LeaderElectionNamespace:       cf.leaderNamespace(),
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &cf.leaseDuration,
		RenewDeadline:                 &cf.renewDeadline,
		RetryPeriod:                   &cf.retryPeriod,
	}
	if cf.leaderElect {
		lo := lease.DefaultOptions(cf.leaderNamespace())
		lock, err := lease.Lock(cfg, lo) // identity "$POD_NAME_<uuid>": an operator sees which pod leads
		if err != nil {
			return opts, err
		}
		opts.LeaderElectionResourceLockInterface = lock
	}
	return opts, nil
}

// watchEdits makes the leader sync at once when the spec of a ModuleInstance, the
// Platform or a Registry changes in the cluster, or one is deleted (`kubectl edit`,
// `kubectl delete`): the sync finds it out of step with Git and mirrors it again (and
// applies an instance). Kicks coalesce.
func watchEdits(mgr manager.Manager, kick func(), keep inventoryKeeper, log logr.Logger) error {
	kicked := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		kick()
		return reconcile.Result{}, nil
	})
	for name, obj := range map[string]client.Object{
		"moduleinstance-edits": &cairnv1.ModuleInstance{}, "platform-edits": &cairnv1.Platform{}, "registry-edits": &cairnv1.Registry{},
	} {
		err := ctrl.NewControllerManagedBy(mgr).Named(name).
			For(obj, builder.WithPredicates(keepDeleted(keep, log), notOwnWrite, predicate.Or[client.Object](predicate.GenerationChangedPredicate{},
				syncAnnotationsChanged))).Complete(kicked)
		if err != nil {
			return fmt.Errorf("failed to watch %s: %w", name, err)
		}
	}
	return nil
}

// notOwnWrite drops the events of cairn's own writes (its mirror of Git, by the field
// manager cairn): a sync made them, and a kick for them would only run the revision
// step again to find nothing to do. A deletion always passes, and so does the
// removal of an annotation (`cairn release`, `cairn resume`): its writer owned
// nothing else, so it leaves no managedFields entry to tell it from cairn's.
var notOwnWrite = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return !lastWriteIsCairns(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !lastWriteIsCairns(e.ObjectNew) || annotationRemoved(e.ObjectOld, e.ObjectNew)
	},
}

// annotationRemoved reports whether an annotation of old is gone from new.
func annotationRemoved(old, new client.Object) bool {
	for k := range old.GetAnnotations() {
		if _, ok := new.GetAnnotations()[k]; !ok {
			return true
		}
	}
	return false
}

// lastWriteIsCairns reports whether the latest write of obj's fields (its
// managedFields, outside subresources) is cairn's alone; on a tie within the same
// second another writer wins, so an edit is never missed.
func lastWriteIsCairns(obj client.Object) bool {
	var latest time.Time
	cairns := false
	for _, f := range obj.GetManagedFields() {
		if f.Subresource != "" || f.Time == nil {
			continue
		}
		switch t := f.Time.Time; {
		case t.After(latest):
			latest, cairns = t, f.Manager == cairnv1.FieldManager
		case t.Equal(latest):
			cairns = cairns && f.Manager == cairnv1.FieldManager
		}
	}
	return cairns
}

// inventoryKeeper is reconciler.Engine.KeepInventoryOfDeleted.
type inventoryKeeper func(context.Context, *cairnv1.ModuleInstance) error

// keepDeleted keeps the inventory of each ModuleInstance deleted by hand before the
// deletion kicks a sync, so that the sync finds every object of it (see
// reconciler.Engine.KeepInventoryOfDeleted). It filters nothing.
func keepDeleted(keep inventoryKeeper, log logr.Logger) predicate.Funcs {
	return predicate.Funcs{DeleteFunc: func(e event.DeleteEvent) bool {
		if mi, ok := e.Object.(*cairnv1.ModuleInstance); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := keep(ctx, mi); err != nil {
				log.Error(err, "failed to keep the inventory of a deleted ModuleInstance", "instance", mi.Namespace+"/"+mi.Name)
			}
		}
		return true
	}}
}

package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/lease"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/shard"
)

// startInstanceReconciles runs, on every replica, the instance reconciles of the
// shards it holds (--shards, docs/architecture.md steps 7 and 8): a shard.Set takes
// its share of the Leases cairn-shard-<i>, and a controller of ModuleInstances
// reconciles, --concurrent at once, each instance of a held shard from its CR. The
// leader's sync then runs only the revision step and waits for the CRs
// (reconciler.Options.Sharded).
func startInstanceReconciles(ctx context.Context, mgr manager.Manager, cfg *rest.Config, e *reconciler.Engine, repo *repoFlags,
	recent *loop.Recent, cf *controllerFlags, log logr.Logger) error {
	if repo.isDir() {
		return fmt.Errorf("--shards needs a Git repository (--repo URL): replicas read each instance's revision by its SHA")
	}
	opts, err := repo.gitOptions()
	if err != nil {
		return err
	}
	opts.CacheDir = filepath.Join(opts.CacheDir, "instances") // the leader's loop fetches into the other
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	requeue := make(chan event.TypedGenericEvent[*cairnv1.ModuleInstance], 1024)
	so := shard.DefaultOptions(repo.namespace, lease.NewIdentity(), cf.shards)
	so.LeaseDuration, so.RenewDeadline, so.RetryPeriod = cf.leaseDuration, cf.renewDeadline, cf.retryPeriod
	so.Log = log.WithName("shards")
	var set *shard.Set
	so.OnChange = func(acquired, _ []int) {
		if len(acquired) > 0 {
			go requeueShards(ctx, mgr, set, acquired, requeue, log)
		}
	}
	if set, err = shard.New(cs.CoordinationV1(), so); err != nil {
		return err
	}
	if err := mgr.Add(set); err != nil {
		return err
	}
	// A revision this process's leader has just read is taken from memory; another
	// (this replica does not lead, or the revision is older) is fetched into a clone
	// of the replicas' own.
	src := loop.ReadThrough{Recent: recent, Source: loop.NewGitRepo(opts, "")}
	instances := &loop.Instances{Engine: e.ForInstances(), Source: src, Reader: mgr.GetClient(),
		Shards: set, Log: log.WithName("instances")}
	return ctrl.NewControllerManagedBy(mgr).Named("moduleinstances").
		For(&cairnv1.ModuleInstance{}).
		WatchesRawSource(source.Channel(requeue, &handler.TypedEnqueueRequestForObject[*cairnv1.ModuleInstance]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: cf.concurrent, NeedLeaderElection: ptr.To(false)}).
		Complete(instances)
}

// requeueShards queues the instances of the shards just acquired: their last holder
// may have left them unfinished.
func requeueShards(ctx context.Context, mgr manager.Manager, set *shard.Set, acquired []int,
	out chan<- event.TypedGenericEvent[*cairnv1.ModuleInstance], log logr.Logger) {
	var list cairnv1.ModuleInstanceList
	if err := mgr.GetClient().List(ctx, &list); err != nil {
		log.Error(err, "failed to list the instances of the shards acquired", "shards", acquired)
		return
	}
	held := map[int]bool{}
	for _, i := range acquired {
		held[i] = true
	}
	for i := range list.Items {
		mi := &list.Items[i]
		if held[shard.Of(mi.Namespace, mi.Name, set.Shards())] {
			select {
			case out <- event.TypedGenericEvent[*cairnv1.ModuleInstance]{Object: mi}:
			case <-ctx.Done():
				return
			}
		}
	}
}

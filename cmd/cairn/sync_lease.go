package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/reconciler/lease"
)

// syncLease runs fn while this process holds the sync Lease in cairn's namespace,
// waiting at most wait for another sync (or the controller) to finish.
func syncLease(ctx context.Context, kube *kubeFlags, repo *repoFlags, wait time.Duration, log logr.Logger,
	fn func(context.Context) error) error {
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	opts := lease.DefaultOptions(repo.namespace)
	opts.Wait, opts.Log = wait, log
	return lease.Hold(ctx, cfg, opts, fn)
}

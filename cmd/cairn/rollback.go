package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/status"
)

// rollbackNow applies the rollback asked on ns/name where no controller runs:
// holding the sync Lease, it syncs the revision the cluster last synced again, so
// that the rollback is the only change it makes (with Git down, that revision is
// read from the local Git cache, where the last cairn sync of this machine left
// it). The commit statuses are left alone: a rollback is not a commit's sync.
func rollbackNow(ctx context.Context, cmd *cobra.Command, kube *kubeFlags, repo *repoFlags, logF *logFlags,
	ns, name string, lockWait time.Duration) error {
	log, err := logF.logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	ctx = logr.NewContext(ctx, log)
	rec, err := newEventRecorder(kube)
	if err != nil {
		return err
	}
	defer rec.Flush(eventFlushWait)
	src, err := repo.loopSource()
	if err != nil {
		return err
	}
	e, closeFn, err := engine(kube, repo, nil, nil, log,
		func(o *reconciler.Options) { o.Events, o.Revisions = rec, revisionsOf(src) })
	if err != nil {
		return err
	}
	defer closeFn()
	return syncLease(ctx, kube, repo, lockWait, log, func(ctx context.Context) error {
		last, err := e.LastSynced(ctx)
		if err != nil {
			return err
		}
		if last == "" {
			return fmt.Errorf("the cluster has synced no revision yet: there is nothing to roll %s/%s back from", ns, name)
		}
		rev, err := src.Read(ctx, last, last)
		if err != nil {
			return fmt.Errorf("failed to read revision %s, the one the cluster last synced (the rollback applies no other): %w", last, err)
		}
		if _, dir := src.(loop.Dir); dir && rev.SHA != last {
			return fmt.Errorf("%s changed since the cluster last synced it (%s, now %s): run cairn sync first, or roll back "+
				"from the Git repository", repo.repo, last, rev.SHA)
		}
		res, err := e.Sync(ctx, rev)
		if err != nil {
			return err
		}
		if res.Error != nil {
			return fmt.Errorf("revision %s could not be synced again: %w", last, res.Error)
		}
		for _, r := range res.Instances {
			if r.Namespace == ns && r.Name == name {
				fmt.Fprintf(cmd.OutOrStdout(), "  %-40s %-9s %s\n", ns+"/"+name, r.Action, r.Message)
			}
		}
		return nil
	})
}

// checkRolledBack tells whether ns/name reports the rollback req after it was
// applied at once, and why not.
func checkRolledBack(ctx context.Context, c client.Client, ns, name string, req *cairnv1.HoldRequest) error {
	mi := &cairnv1.ModuleInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return err
	}
	if h := mi.Status.Held; status.SameHold(h, req) && h.RenderDigest == req.To {
		return nil
	}
	return fmt.Errorf("%s/%s: the rollback failed: %s", ns, name, conditions.GetMessage(mi, "Ready"))
}

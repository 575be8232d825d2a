package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/revert"
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

// openRevertPR opens the pull request that puts ref's declaration back as it was
// at the revision it is held at (cairn rollback --open-pr).
func openRevertPR(cmd *cobra.Command, kube *kubeFlags, repo *repoFlags, forgeF *forgeFlags, ref string) error {
	ctx := cmd.Context()
	c, ns, name, err := instanceClient(kube, ref)
	if err != nil {
		return err
	}
	mi := &cairnv1.ModuleInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return err
	}
	held := mi.Status.Held
	if held == nil || held.Revision == "" {
		return fmt.Errorf("%s/%s is not held at a revision yet: no pull request opened (cairn history %s/%s)", ns, name, ns, name)
	}
	fc, _, err := forgeF.client()
	if err != nil {
		return err
	}
	proposer, ok := fc.(forge.Proposer)
	if !ok {
		return fmt.Errorf("--forge %s cannot open pull requests", forgeF.kind)
	}
	u, err := repo.url()
	if err != nil {
		return err
	}
	where, err := forgeF.repoRef(u)
	if err != nil {
		return err
	}
	g, err := repo.gitRepo()
	if err != nil {
		return err
	}
	head, err := g.Head(ctx)
	if err != nil {
		return fmt.Errorf("no pull request opened: failed to read branch %s: %w", repo.branch, err)
	}
	headRev, err := g.Read(ctx, head, "")
	if err != nil {
		return fmt.Errorf("no pull request opened: %w", err)
	}
	heldRev, err := g.Read(ctx, held.Revision, "")
	if err != nil {
		return fmt.Errorf("no pull request opened: failed to read the held revision %s: %w", held.Revision, err)
	}
	r, err := revert.Instance(heldRev.Tree, headRev.Tree, revert.Options{Path: repo.path, CairnNamespace: repo.namespace}, ns, name)
	if err != nil {
		return fmt.Errorf("no pull request opened: %w", err)
	}
	short := held.Revision[:min(len(held.Revision), 12)]
	at := time.Now().UTC()
	if held.At != nil {
		at = held.At.UTC()
	}
	branch := fmt.Sprintf("cairn/rollback/%s/%s-%s", ns, name, at.Format("20060102T150405Z"))
	if len(branch) > 100 { // Gitea's limit; the time keeps it unique
		branch = "cairn/rollback/" + at.Format("20060102T150405Z") + "-" + name[:min(len(name), 60)]
	}
	title := fmt.Sprintf("Roll back %s/%s to %s", ns, name, short)
	p, err := proposer.ProposeChange(ctx, where, forge.Change{
		Base: repo.branch, BaseSHA: head, Branch: branch, Title: title, Message: title + "\n\n" + revertBody(mi, r),
		Body: revertBody(mi, r), Files: r.Files,
	})
	if err != nil {
		return fmt.Errorf("no pull request opened: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "opened pull request #%d to put %s/%s's declaration back at %s: %s\n", p.Number, ns, name, short, p.URL)
	return nil
}

// revertBody is the pull request's description: the hold it follows, what it
// changes, what it leaves, and what to do once merged.
func revertBody(mi *cairnv1.ModuleInstance, r *revert.Revert) string {
	h := mi.Status.Held
	var b strings.Builder
	fmt.Fprintf(&b, "cairn rolled `%s/%s` back to the render `%s` of revision %s and holds it there (%s).\n\n",
		mi.Namespace, mi.Name, h.RenderDigest, h.Revision, status.HeldMessage(h))
	b.WriteString("This puts its declaration back as it was at that revision, so that Git says again what the cluster runs:\n\n")
	for _, f := range r.Files {
		verb := "reverted"
		switch {
		case f.Delete:
			verb = "deleted (added since)"
		case !f.Existed:
			verb = "added back"
		}
		fmt.Fprintf(&b, "- `%s`: %s\n", f.Path, verb)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNot reverted: %s.\n", n)
	}
	fmt.Fprintf(&b, "\nOnce this is merged, `cairn release %s/%s` hands the instance back to Git (`cairn history %s/%s` lists its renders).\n",
		mi.Namespace, mi.Name, mi.Namespace, mi.Name)
	return b.String()
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/lease"
	"cairn.dev/cairn/reconciler/requests"
	"cairn.dev/cairn/reconciler/status"
)

// holdFlags are the flags of cairn hold and cairn release.
type holdFlags struct {
	to          string
	untilChange bool
	wait        bool
	timeout     time.Duration
	namespace   string
	// now applies a rollback at once where no controller runs (nil: the next
	// cairn sync applies it).
	now func(ctx context.Context, ns, name string) error
}

func (f *holdFlags) register(cmd *cobra.Command) {
	f.registerWait(cmd)
	cmd.Flags().StringVar(&f.namespace, "namespace", reconciler.DefaultNamespace, "cairn's namespace, where the sync Lease lives")
}

func (f *holdFlags) registerWait(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.wait, "wait", true, "under a controller, wait until the instance reports the result")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long --wait waits")
}

func newHoldCommand(kube *kubeFlags) *cobra.Command {
	var f holdFlags
	cmd := &cobra.Command{
		Use:   "hold NAMESPACE/NAME",
		Short: "Hold one instance at the render it last applied while the others keep following Git",
		Long: `Annotate the instance's ModuleInstance with ` + cairnv1.HoldAnnotation + ` (who asked, when). From then on new
commits are not applied to it: it keeps the render it last applied, shown in status.held and a Held
condition, while the Platform and every other instance go on as usual. cairn release ends the hold;
with --until-change, it ends by itself at the first commit that changes this instance's declaration
or module (what "until the fix lands" means). The hold lives in the cluster: it survives restarts
and leader changes.

Under a controller the hold is asked through the annotation and the command waits until the
instance reports it (--wait). Where no controller runs, it is recorded at once, holding the sync
Lease as cairn sync does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return hold(cmd, kube, &f, args[0], true) },
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.untilChange, "until-change", false, "end the hold at the first commit that changes this instance")
	return cmd
}

func newRollbackCommand(kube *kubeFlags) *cobra.Command {
	var (
		f      holdFlags
		repo   repoFlags
		logF   logFlags
		forgeF forgeFlags
		openPR bool
	)
	cmd := &cobra.Command{
		Use:   "rollback NAMESPACE/NAME --to REVISION|DIGEST",
		Short: "Put one instance back at an earlier render of its history, verified, and hold it there",
		Example: `  cairn history team-a/podinfo
  cairn rollback team-a/podinfo --to 3f2c1e9
  cairn rollback team-a/podinfo --to 3f2c1e9 --repo https://git.example.com/platform.git   # no controller runs`,
		Long: `Apply again the render of the instance's status.history that --to names (its render digest, or the
revision it was applied at), then hold the instance there (cairn release ends it). With render.publish the
render comes from its published artifact, pulled by digest and verified under the publish Registry's key
before anything is applied (a render whose signature no longer verifies is refused); the Git server is not
needed. The apply follows every rule of a sync: ownership, the instance's ServiceAccount, the prune guards
for objects added since, health. Every other instance keeps following Git.

The rollback is asked through the ` + cairnv1.HoldAnnotation + ` annotation; under a controller the command
waits until the instance reports it (--wait). Where no controller runs, give the repository flags of your
cairn sync (--repo, --branch, --path, credentials): the command then applies the rollback at once, holding
the sync Lease, at the revision the cluster last synced (read from the local Git cache when the server is
down); without them, the next cairn sync applies it.

With --open-pr (and --forge, --forge-token-file, and --repo the Git URL), once the rollback is done it
opens a pull request that puts the instance's declaration (and its own local module, when it changed
and no other instance uses it) back as it was at that revision, naming the hold, so that Git and the
cluster agree again through review. It is committed through the forge's API (the Git credential may be
read-only) on a new branch cairn/rollback/NAMESPACE/NAME-<time>.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.to == "" {
				return fmt.Errorf("give the render to roll back to: --to REVISION|DIGEST (cairn history %s lists them)", args[0])
			}
			f.namespace = repo.namespace
			if openPR && (forgeF.kind == "" || !cmd.Flags().Changed("repo") || repo.isDir()) {
				return fmt.Errorf("--open-pr needs --forge (with --forge-token-file) and --repo, the Git URL of the repository on the forge")
			}
			if cmd.Flags().Changed("repo") {
				f.now = func(ctx context.Context, ns, name string) error {
					return rollbackNow(ctx, cmd, kube, &repo, &logF, ns, name, f.timeout)
				}
			}
			if err := hold(cmd, kube, &f, args[0], true); err != nil || !openPR {
				return err
			}
			return openRevertPR(cmd, kube, &repo, &forgeF, args[0])
		},
	}
	f.registerWait(cmd)
	repo.register(cmd, false)
	logF.register(cmd)
	forgeF.registerClient(cmd, "with --open-pr, open the pull request on this forge")
	cmd.Flags().BoolVar(&openPR, "open-pr", false, "once rolled back, open a pull request that reverts the instance's declaration to that revision")
	cmd.Flags().StringVar(&f.to, "to", "", "the render of status.history to apply again: its render digest or its revision (a SHA or a prefix of 7 or more)")
	return cmd
}

func newReleaseCommand(kube *kubeFlags) *cobra.Command {
	var f holdFlags
	cmd := &cobra.Command{
		Use:   "release NAMESPACE/NAME",
		Short: "End the hold of an instance (cairn hold): the next sync applies what Git says",
		Long: `Ask for the end of the instance's hold through its ` + cairnv1.HoldAnnotation + ` annotation, naming who asked:
cairn records the release (a Released Event names them), removes the annotation, and the next sync
applies what Git says. Under a controller the command waits until the instance reports it; where
no controller runs, it records it at once, holding the sync Lease.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return hold(cmd, kube, &f, args[0], false) },
	}
	f.register(cmd)
	return cmd
}

// hold asks for a hold of ref (on) or its release (off) and waits for, or
// records, the result.
func hold(cmd *cobra.Command, kube *kubeFlags, f *holdFlags, ref string, on bool) error {
	ctx := cmd.Context()
	c, ns, name, err := instanceClient(kube, ref)
	if err != nil {
		return err
	}
	var target *cairnv1.HistoryEntry
	attempted := "" // the input last attempted before a rollback: a new attempt is the rollback's
	if f.to != "" {
		mi := &cairnv1.ModuleInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
			return fmt.Errorf("failed to read ModuleInstance %s/%s: %w", ns, name, err)
		}
		if target, err = status.RollbackTarget(mi, f.to); err != nil {
			return err
		}
		attempted = mi.Status.LastAttemptedInput
	}
	at := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	asked := &cairnv1.HoldRequest{By: whoAmI(ctx, c), At: &at, UntilChange: f.untilChange, Release: !on}
	if target != nil {
		asked.To = target.RenderDigest
	}
	b, err := json.Marshal(asked)
	if err != nil {
		return err
	}
	if err := requests.Annotate(ctx, c, ns, name, cairnv1.HoldAnnotation, string(b), requests.HoldManager); err != nil {
		return err
	}
	var req *cairnv1.HoldRequest // the hold to wait for; nil: the release
	if on {
		req = asked
	}
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	opts := lease.DefaultOptions(f.namespace)
	opts.Wait = 3 * time.Second
	holder, leads := leaseHeld(ctx, c, f.namespace)
	switch {
	case leads:
		err = &lease.HeldError{Namespace: f.namespace, Holder: holder} // a controller leads: it acts
	case target == nil:
		err = lease.Hold(ctx, cfg, opts, func(ctx context.Context) error { return recordHoldNow(ctx, c, ns, name, req) })
	case f.now != nil:
		if err = f.now(ctx, ns, name); err == nil {
			err = checkRolledBack(ctx, c, ns, name, req)
		}
	}
	var busy *lease.HeldError
	switch {
	case errors.As(err, &busy):
		// A controller (or a sync) holds the Lease: it records the hold.
		if !f.wait {
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: %s asked of %s\n", ns, name, verb(on), busy.Holder)
			return nil
		}
		if err := waitForHold(ctx, c, ns, name, req, attempted, f.timeout); err != nil {
			return err
		}
	case err != nil:
		return err
	case target != nil && f.now == nil:
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: rollback to %s (revision %s) asked; no controller runs: the next `cairn sync` applies it "+
			"(give --repo, as to cairn sync, to apply it now)\n", ns, name, target.RenderDigest, target.Revision)
		return nil
	}
	mi := &cairnv1.ModuleInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return err
	}
	if on {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s; `cairn release %s/%s` ends it\n", ns, name, status.HeldMessage(mi.Status.Held), ns, name)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s released: the next sync applies what Git says\n", ns, name)
	}
	return nil
}

func verb(on bool) string {
	if on {
		return "hold"
	}
	return "release"
}

// recordHoldNow records the hold req (nil: the release) on ns/name as a sync
// would: where no controller runs, the command holds the sync Lease and does it.
func recordHoldNow(ctx context.Context, c client.Client, ns, name string, req *cairnv1.HoldRequest) error {
	mi := &cairnv1.ModuleInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err != nil {
		return err
	}
	before := mi.DeepCopy()
	if req == nil {
		status.Release(mi)
	} else if !status.Hold(mi, req, "", time.Now()) { // the next sync records the input it holds
		return fmt.Errorf("%s/%s has applied no render yet: there is nothing to hold (the hold starts after its first sync)", ns, name)
	}
	if err := c.Status().Patch(ctx, mi, client.MergeFrom(before)); err != nil {
		return err
	}
	if req == nil { // the release is recorded: its request goes
		return requests.Annotate(ctx, c, ns, name, cairnv1.HoldAnnotation, "", requests.HoldManager)
	}
	return nil
}

// waitForHold waits until ns/name reports the hold req (nil: its release), or, for
// a rollback, a failed attempt after the one it last attempted before (attempted).
func waitForHold(ctx context.Context, c client.Client, ns, name string, req *cairnv1.HoldRequest, attempted string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		mi := &cairnv1.ModuleInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mi); err == nil {
			h := mi.Status.Held
			if req == nil && h == nil && !conditions.Has(mi, cairnv1.HeldCondition) ||
				status.SameHold(h, req) && (req.To == "" || h.RenderDigest == req.To) {
				return nil
			}
			if req != nil && req.To != "" && mi.Status.LastAttemptedInput != attempted && !conditions.IsTrue(mi, "Ready") &&
				!conditions.IsTrue(mi, "Reconciling") {
				return fmt.Errorf("%s/%s: the rollback failed: %s", ns, name, conditions.GetMessage(mi, "Ready"))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s did not report its %s within %s: the controller records it at its next sync", ns, name,
				verb(req != nil), timeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// leaseHeld tells whether another process holds the sync Lease now (its last
// renewal within its duration), and who: then a controller acts on the request,
// and waiting for the Lease would only delay the answer.
func leaseHeld(ctx context.Context, c client.Client, namespace string) (string, bool) {
	var l coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: lease.Name}, &l); err != nil {
		return "", false
	}
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil {
		return "", false
	}
	d := 15 * time.Second
	if s.LeaseDurationSeconds != nil {
		d = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	return *s.HolderIdentity, time.Since(s.RenewTime.Time) < d
}

// whoAmI is the user the cluster authenticates c as (a SelfSubjectReview), ""
// when it does not say.
func whoAmI(ctx context.Context, c client.Client) string {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return ""
	}
	return review.Status.UserInfo.Username
}

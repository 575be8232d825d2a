package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/loop"
	"cairn.dev/cairn/reconciler/requests"
)

func newSuspendCommand(kube *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "suspend NAMESPACE/NAME",
		Short: "Stop syncing one instance without a commit (an emergency stop that Git does not undo)",
		Long: `Annotate the instance's ModuleInstance with ` + cairnv1.SuspendAnnotation + `: "true". From the next sync
on, its objects are left as they are: no render, apply, prune, drift correction or removal, whatever
Git says. cairn status shows it SUSPENDED; cairn resume undoes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setSuspend(cmd, kube, args[0], true)
		},
	}
}

func newResumeCommand(kube *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NAMESPACE/NAME",
		Short: "Resume an instance stopped with cairn suspend (the next sync applies what Git says)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return setSuspend(cmd, kube, args[0], false)
		},
	}
}

func newReconcileCommand(kube *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile NAMESPACE/NAME | reconcile source",
		Short: "Ask for one instance to be applied again, or for the branch head to be synced at once",
		Long: `cairn reconcile NAMESPACE/NAME annotates the instance's ModuleInstance with ` + cairnv1.ReconcileRequestAnnotation + `: <now>.
The next sync applies every object of the instance again, changed or not, and checks its health, as
` + "`flux reconcile`" + ` does; status.lastHandledReconcileAt records the request once handled. The
controller syncs at once; with cairn sync, the next sync of the repository handles it.

cairn reconcile source sets the same annotation on the Platform CR: the controller's leader fetches
the branch and syncs its head at once, before its next poll, and records the request in the
Platform's status.lastHandledReconcileAt (cairn status shows it).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "source" {
				return reconcileSource(cmd, kube)
			}
			c, ns, name, err := instanceClient(kube, args[0])
			if err != nil {
				return err
			}
			now := time.Now().UTC().Format(time.RFC3339Nano)
			if err := requests.Annotate(cmd.Context(), c, ns, name, cairnv1.ReconcileRequestAnnotation, now, requests.ReconcileManager); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: reconcile requested at %s\n", ns, name, now)
			return nil
		},
	}
}

// reconcileSource asks the controller to sync the branch head at once.
func reconcileSource(cmd *cobra.Command, kube *kubeFlags) error {
	c, err := kube.client()
	if err != nil {
		return err
	}
	at, err := loop.RequestSourceReconcile(cmd.Context(), c, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "source: reconcile requested at %s (the controller syncs the branch head at once)\n", at)
	return nil
}

// instanceClient parses NAMESPACE/NAME and connects to the cluster.
func instanceClient(kube *kubeFlags, ref string) (client.Client, string, string, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return nil, "", "", fmt.Errorf("give the instance as NAMESPACE/NAME, not %q", ref)
	}
	c, err := kube.client()
	return c, ns, name, err
}

// client connects to the cluster with cairn's types.
func (k *kubeFlags) client() (client.Client, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: reconciler.Scheme})
}

// setSuspend sets or removes the suspend annotation on NAMESPACE/NAME.
func setSuspend(cmd *cobra.Command, kube *kubeFlags, ref string, suspend bool) error {
	c, ns, name, err := instanceClient(kube, ref)
	if err != nil {
		return err
	}
	value := ""
	if suspend {
		value = "true"
	}
	if err := requests.Annotate(cmd.Context(), c, ns, name, cairnv1.SuspendAnnotation, value, requests.SuspendManager); err != nil {
		return err
	}
	if suspend {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s suspended: the next sync leaves its objects as they are; `cairn resume %s/%s` undoes it\n", ns, name, ns, name)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s resumed: the next sync applies what Git says\n", ns, name)
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

func newUninstallCommand(kube *kubeFlags) *cobra.Command {
	namespace := reconciler.DefaultNamespace
	cmd := &cobra.Command{
		Use: "uninstall",
		Short: "Remove the controller (Deployment, Service, PodDisruptionBudget, RBAC, ServiceAccount); " +
			"keep the CRDs, cairn's namespace and its Secrets, and every object cairn applied",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := adminManager(kube)
			if err != nil {
				return err
			}
			return uninstall(cmd.Context(), m.Client(), cmd.OutOrStdout(), namespace)
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", namespace, "cairn's namespace")
	return cmd
}

// uninstall deletes the controller's objects, the Deployment first (so that no
// replica runs without its RBAC), and prints one line per object.
func uninstall(ctx context.Context, c client.Client, out io.Writer, namespace string) error {
	o := controller.DefaultOptions()
	o.Namespace, o.AllowApplyAsController = namespace, true // its binding goes too, when installed
	objs := controller.Removable(o)
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		what := fmt.Sprintf("%s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
		if obj.GetNamespace() != "" {
			what = fmt.Sprintf("%s/%s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
		}
		err := c.Delete(ctx, obj, client.PropagationPolicy("Background"))
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintln(out, what, "not found")
		case err != nil:
			return fmt.Errorf("failed to delete %s: %w", what, err)
		default:
			fmt.Fprintln(out, what, "deleted")
		}
	}
	return nil
}

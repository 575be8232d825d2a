package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/manifests"
	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

// installFlags are the flags of `cairn install`.
type installFlags struct {
	namespace  string
	controller bool
	dryRun     bool
	output     string
	ctrl       controllerInstallFlags
}

func newInstallCommand(kube *kubeFlags) *cobra.Command {
	f := &installFlags{namespace: reconciler.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Apply cairn's CustomResourceDefinitions and its namespace (with --controller: the in-cluster controller too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objects, err := f.objects()
			if err != nil {
				return err
			}
			if f.dryRun {
				return printManifests(cmd.OutOrStdout(), objects, f.output)
			}
			if err := applyManifests(cmd.Context(), kube, cmd.OutOrStdout(), objects); err != nil || !f.controller {
				return err
			}
			return f.revokeApplyAsController(cmd.Context(), kube, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.namespace, "namespace", f.namespace, "cairn's namespace, where the Secrets and ConfigMaps that Registries name live")
	fl.BoolVar(&f.controller, "controller", false, "also install the controller: ServiceAccount, RBAC, Deployment, Service, PodDisruptionBudget")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the manifests instead of applying them (credential Secrets are left out)")
	fl.StringVarP(&f.output, "output", "o", "yaml", "format of --dry-run: yaml")
	f.ctrl.register(cmd)
	return cmd
}

// objects are the CRDs, cairn's namespace and, with --controller, the controller's
// objects and credential Secrets.
func (f *installFlags) objects() ([]*unstructured.Unstructured, error) {
	objects, err := embeddedCRDs()
	if err != nil {
		return nil, err
	}
	if !f.controller {
		if f.ctrl.changed() {
			return nil, fmt.Errorf("the controller's flags need --controller")
		}
		ns, err := controller.ToUnstructured(controller.Namespace(f.namespace))
		return append(objects, ns...), err
	}
	opts, err := f.ctrl.options(f.namespace)
	if err != nil {
		return nil, err
	}
	ctrlObjects, err := controller.Objects(opts)
	if err != nil {
		return nil, err
	}
	for _, s := range controller.Secrets(opts) {
		ctrlObjects = append(ctrlObjects, s)
	}
	us, err := controller.ToUnstructured(ctrlObjects...)
	return append(objects, us...), err
}

// applyManifests applies objects with server-side apply, the CRDs and the namespace
// first, and prints one line per object.
func applyManifests(ctx context.Context, kube *kubeFlags, out io.Writer, objects []*unstructured.Unstructured) error {
	m, err := adminManager(kube)
	if err != nil {
		return err
	}
	opts := ssa.DefaultApplyOptions()
	opts.WaitTimeout = time.Minute
	cs, err := m.ApplyAllStaged(ctx, objects, opts)
	if err != nil {
		return fmt.Errorf("failed to install: %w", err)
	}
	for _, e := range cs.Entries {
		fmt.Fprintln(out, e.String())
	}
	return nil
}

// revokeApplyAsController deletes the binding of --allow-apply-as-controller when an
// install leaves the flag out: the choice is the last install's, never a leftover.
func (f *installFlags) revokeApplyAsController(ctx context.Context, kube *kubeFlags, out io.Writer) error {
	if f.ctrl.opts.AllowApplyAsController {
		return nil
	}
	m, err := adminManager(kube)
	if err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: controller.ApplyAsControllerBinding}}
	err = m.Client().Delete(ctx, binding)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("failed to delete ClusterRoleBinding/%s (the install leaves out --allow-apply-as-controller): %w",
			controller.ApplyAsControllerBinding, err)
	}
	fmt.Fprintf(out, "ClusterRoleBinding/%s deleted (no --allow-apply-as-controller)\n", controller.ApplyAsControllerBinding)
	return nil
}

// adminManager is a resource manager with the kubeconfig's own identity.
func adminManager(kube *kubeFlags) (*ssa.ResourceManager, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	cluster, err := reconciler.NewCluster(cfg)
	if err != nil {
		return nil, err
	}
	return cluster.Manager("", "")
}

// printManifests writes the objects of --dry-run, leaving out the data of Secrets.
func printManifests(out io.Writer, objects []*unstructured.Unstructured, format string) error {
	if format != "yaml" {
		return fmt.Errorf("-o %q: --dry-run prints yaml", format)
	}
	var printed []*unstructured.Unstructured
	for _, u := range objects {
		if u.GetKind() == "Secret" {
			fmt.Fprintf(out, "# Secret %s/%s holds a credential file: cairn install creates it, --dry-run never prints it\n",
				u.GetNamespace(), u.GetName())
			continue
		}
		printed = append(printed, u)
	}
	b, err := controller.YAML(printed)
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}

func embeddedCRDs() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := fs.WalkDir(manifests.CRDs, "crds", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := manifests.CRDs.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		objs, err := ssautils.ReadObjects(f)
		if err != nil {
			return fmt.Errorf("failed to read %s: %w", p, err)
		}
		for _, o := range objs {
			o.SetLabels(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue})
		}
		out = append(out, objs...)
		return nil
	})
	return out, err
}

package main

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/manifests"
	"cairn.dev/cairn/reconciler"
)

func newInstallCommand(kube *kubeFlags) *cobra.Command {
	namespace := reconciler.DefaultNamespace
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Apply cairn's CustomResourceDefinitions and its namespace (where Registry Secrets live) to the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			cluster, err := reconciler.NewCluster(cfg)
			if err != nil {
				return err
			}
			m, err := cluster.Manager("", "")
			if err != nil {
				return err
			}
			objects, err := embeddedCRDs()
			if err != nil {
				return err
			}
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName(namespace)
			ns.SetLabels(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue})
			objects = append(objects, ns)
			opts := ssa.DefaultApplyOptions()
			opts.WaitTimeout = time.Minute
			cs, err := m.ApplyAllStaged(cmd.Context(), objects, opts)
			if err != nil {
				return fmt.Errorf("failed to install CRDs: %w", err)
			}
			for _, e := range cs.Entries {
				fmt.Fprintln(cmd.OutOrStdout(), e.String())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", namespace, "cairn's namespace, where the Secrets and ConfigMaps that Registries name live")
	return cmd
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

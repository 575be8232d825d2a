package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

func newRenderCommand() *cobra.Command {
	var (
		repo     repoFlags
		instance string
		output   string
		caps     capabilityFlags
	)
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Render the instances of a platform repository (no cluster needed)",
		Example: `  cairn render --repo ./platform
  cairn render --repo ./platform --instance team-a/web -o json
  cairn render --repo https://git.example.com/platform.git --ref main
  cairn render --repo ./platform --kube-version 1.36 --api-versions monitoring.coreos.com/v1/ServiceMonitor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "yaml" && output != "json" {
				return fmt.Errorf("--output must be yaml or json, not %q", output)
			}
			rev, opts, err := repo.offlineInputs(cmd.Context(), caps)
			if err != nil {
				return err
			}
			renderer := newRenderer()
			defer renderer.Close()
			out, err := reconciler.RenderOffline(cmd.Context(), renderer, rev, opts, instance)
			if err != nil {
				return err
			}
			return printRendered(cmd.OutOrStdout(), cmd.ErrOrStderr(), out, output)
		},
	}
	repo.register(cmd, true)
	cmd.Flags().StringVar(&instance, "instance", "", "render only this instance (namespace/name)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	caps.register(cmd)
	return cmd
}

func newRenderer() *render.Renderer { return render.NewRenderer() }

// engineOptions are the engine options the repository flags imply.
func (f *repoFlags) engineOptions() (reconciler.Options, error) {
	opts := reconciler.DefaultOptions()
	opts.Path = f.path
	opts.RenderCacheDir = filepath.Join(f.cacheDir, "modules")
	opts.Namespace = f.namespace
	if f.registryConfig != "" {
		data, err := os.ReadFile(f.registryConfig)
		if err != nil {
			return opts, fmt.Errorf("failed to read --registry-config: %w", err)
		}
		opts.RegistryConfig = data
	}
	return opts, nil
}

func printRendered(stdout, stderr io.Writer, out []reconciler.Rendered, format string) error {
	failed := false
	var all []any
	for _, r := range out {
		for _, w := range r.Warnings {
			fmt.Fprintf(stderr, "warning: %s/%s: %s\n", r.Namespace, r.Name, w)
		}
		for _, a := range r.Artifacts {
			fmt.Fprintf(stderr, "artifact: %s/%s: %s\n", r.Namespace, r.Name, reconciler.ArtifactLine(a))
		}
		for _, name := range r.Generated {
			fmt.Fprintf(stderr, "generated in the cluster: %s/%s: %s (values never rendered)\n", r.Namespace, r.Name, name)
		}
		if r.Err != nil {
			failed = true
			fmt.Fprintf(stderr, "error: %s/%s: %v\n", r.Namespace, r.Name, r.Err)
			continue
		}
		for _, u := range r.Objects {
			if format == "json" {
				all = append(all, u.Object)
				continue
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "---\n# %s/%s\n%s", r.Namespace, r.Name, b)
		}
		if err := printHooks(stdout, r, format, &all); err != nil {
			return err
		}
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": nonNilList(all)}); err != nil {
			return err
		}
	}
	if failed {
		return errInstancesFailed
	}
	return nil
}

func nonNilList(items []any) []any {
	if items == nil {
		return []any{}
	}
	return items
}

// printHooks prints a chart's Helm hooks after its objects, as helm template does,
// each headed by the events it runs on; in JSON they follow the objects.
func printHooks(w io.Writer, r reconciler.Rendered, format string, all *[]any) error {
	for _, h := range r.Hooks {
		if format == "json" {
			*all = append(*all, h.Object.Object)
			continue
		}
		b, err := yaml.Marshal(h.Object.Object)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "---\n# %s/%s hook %s (weight %d)\n%s", r.Namespace, r.Name, strings.Join(h.Events, ","), h.Weight, b)
	}
	return nil
}

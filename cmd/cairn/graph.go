package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/internal/graph"
	"cairn.dev/cairn/reconciler"
)

func newGraphCommand(kube *kubeFlags) *cobra.Command {
	var (
		repo   repoFlags
		output string
		caps   capabilityFlags
		status bool
	)
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Draw the instance graph: dependsOn and provider-contract edges",
		Long: `Draw the instances of a platform repository and what each comes after: the
dependsOn edges their authors declared, and the contract edges cairn infers from
the renders (an instance that renders a CustomResourceDefinition provides its kind;
an instance that renders objects of that kind requires it), labelled with the kind.
Instances that fail to render, or that provide a kind another instance provides,
are marked failed. No cluster is needed; with --status, the instances' status in
the cluster (--kubeconfig) marks those that wait for a dependency or a provider
and those whose last sync failed (at the revision the cluster last synced, which
may not be the one drawn).`,
		Example: `  cairn graph --repo ./platform
  cairn graph --repo ./platform -o mermaid
  cairn graph --repo ./platform --status
  cairn graph --repo https://git.example.com/platform.git --ref main -o dot | dot -Tsvg > graph.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format := graph.Format(output)
			if !slices.Contains(graph.Formats, format) {
				return fmt.Errorf("--output: unknown graph format %q (one of text, mermaid, dot)", output)
			}
			rev, opts, err := repo.offlineInputs(cmd.Context(), caps)
			if err != nil {
				return err
			}
			renderer := newRenderer()
			defer renderer.Close()
			g, err := reconciler.GraphOffline(cmd.Context(), renderer, rev, opts)
			if err != nil {
				return err
			}
			if status {
				c, err := kube.client()
				if err != nil {
					return err
				}
				live, err := listInstances(cmd.Context(), c)
				if err != nil {
					return err
				}
				g = reconciler.MarkFromStatus(g, live)
			}
			out, err := g.Draw(format)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	repo.register(cmd, true)
	cmd.Flags().StringVarP(&output, "output", "o", string(graph.Text), "output format: text, mermaid or dot")
	cmd.Flags().BoolVar(&status, "status", false, "mark waiting and failed instances from their status in the cluster")
	caps.register(cmd)
	return cmd
}

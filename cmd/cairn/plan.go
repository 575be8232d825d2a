package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/reconciler"
)

func newPlanCommand(kube *kubeFlags) *cobra.Command {
	var (
		repo   repoFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what a sync would do to the live cluster (read-only: server-side dry-run)",
		Example: `  cairn plan --repo ./platform
  cairn plan --repo https://git.example.com/platform.git --ref feature-x -o markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" && output != "markdown" {
				return fmt.Errorf("--output must be text, json or markdown, not %q", output)
			}
			e, closeFn, err := engine(kube, &repo, false, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeFn()
			base, err := e.LastSynced(cmd.Context())
			if err != nil {
				return err
			}
			rev, err := repo.readRevision(cmd.Context(), base)
			if err != nil {
				return err
			}
			plan, err := e.Plan(cmd.Context(), rev)
			if err != nil {
				return err
			}
			if err := printPlan(cmd.OutOrStdout(), plan, output); err != nil {
				return err
			}
			if plan.Failed() {
				return errInstancesFailed
			}
			return nil
		},
	}
	repo.register(cmd, true)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or markdown")
	return cmd
}

func printPlan(w io.Writer, p *reconciler.Plan, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	case "markdown":
		return printPlanMarkdown(w, p)
	}
	return printPlanText(w, p)
}

func printPlanText(w io.Writer, p *reconciler.Plan) error {
	fmt.Fprintf(w, "Plan for revision %s\n", p.Revision)
	if p.Error != "" {
		fmt.Fprintf(w, "error: %s\n", p.Error)
		return nil
	}
	for _, i := range p.Instances {
		fmt.Fprintf(w, "\n%s/%s: %s", i.Namespace, i.Name, i.Action)
		if i.Why != "" {
			fmt.Fprintf(w, " (%s)", i.Why)
		}
		fmt.Fprintln(w)
		printList(w, "+ create", i.Create)
		printList(w, "~ configure", i.Configure)
		printList(w, "- prune", i.Prune)
		if i.Unchanged > 0 {
			fmt.Fprintf(w, "  = %d unchanged\n", i.Unchanged)
		}
		if len(i.Prune) > 0 || (i.PruneVerdict != "" && i.PruneVerdict != "allowed") {
			fmt.Fprintf(w, "  prune: %s\n", i.PruneVerdict)
		}
		if i.Error != "" {
			fmt.Fprintf(w, "  error (%s): %s\n", i.Reason, i.Error)
		}
	}
	return nil
}

func printList(w io.Writer, prefix string, items []string) {
	for _, it := range items {
		fmt.Fprintf(w, "  %s %s\n", prefix, it)
	}
}

func printPlanMarkdown(w io.Writer, p *reconciler.Plan) error {
	fmt.Fprintf(w, "### cairn plan for `%s`\n\n", p.Revision)
	if p.Error != "" {
		fmt.Fprintf(w, "**Error:** `%s`\n", p.Error)
		return nil
	}
	fmt.Fprintln(w, "| instance | action | create | configure | prune | unchanged |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, i := range p.Instances {
		fmt.Fprintf(w, "| `%s/%s` | %s | %d | %d | %d | %d |\n", i.Namespace, i.Name, i.Action,
			len(i.Create), len(i.Configure), len(i.Prune), i.Unchanged)
	}
	for _, i := range p.Instances {
		if len(i.Create)+len(i.Configure)+len(i.Prune) == 0 && i.Error == "" {
			continue
		}
		fmt.Fprintf(w, "\n<details><summary><code>%s/%s</code>: %s</summary>\n\n```diff\n", i.Namespace, i.Name, i.Action)
		printDiffList(w, "+", i.Create)
		printDiffList(w, "!", i.Configure)
		printDiffList(w, "-", i.Prune)
		fmt.Fprintln(w, "```")
		if i.Error != "" {
			fmt.Fprintf(w, "\n**Error (%s):** `%s`\n", i.Reason, strings.ReplaceAll(i.Error, "`", "'"))
		}
		if i.PruneVerdict != "" && i.PruneVerdict != "allowed" {
			fmt.Fprintf(w, "\n**Prune:** %s\n", i.PruneVerdict)
		}
		fmt.Fprintln(w, "\n</details>")
	}
	return nil
}

func printDiffList(w io.Writer, prefix string, items []string) {
	for _, it := range items {
		fmt.Fprintf(w, "%s %s\n", prefix, it)
	}
}

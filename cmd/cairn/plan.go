package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/go-logr/logr"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/secretgen"
)

func newPlanCommand(kube *kubeFlags) *cobra.Command {
	var (
		repo       repoFlags
		output     string
		base, head string
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
			e, closeFn, err := engine(kube, &repo, nil, nil, logr.Discard())
			if err != nil {
				return err
			}
			defer closeFn()
			plan, err := runPlan(cmd.Context(), e, &repo, base, head)
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
	cmd.Flags().StringVar(&base, "base", "", "plan a change: the base branch or SHA (with --head), e.g. a pull request's target")
	cmd.Flags().StringVar(&head, "head", "", "plan a change: the head branch or SHA (with --base); adds the rendered diff base → head")
	return cmd
}

// runPlan plans the repository against the live cluster, or the change base → head.
func runPlan(ctx context.Context, e *reconciler.Engine, repo *repoFlags, base, head string) (*reconciler.Plan, error) {
	if (base == "") != (head == "") {
		return nil, fmt.Errorf("--base and --head go together")
	}
	if head == "" {
		last, err := e.LastSynced(ctx)
		if err != nil {
			return nil, err
		}
		rev, err := repo.readRevision(ctx, last)
		if err != nil {
			return nil, err
		}
		return e.Plan(ctx, rev)
	}
	baseRev, err := repo.revisionOfRef(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("failed to read --base %s: %w", base, err)
	}
	headRev, err := repo.revisionOfRef(ctx, head)
	if err != nil {
		return nil, fmt.Errorf("failed to read --head %s: %w", head, err)
	}
	return e.PlanChange(ctx, baseRev, headRev)
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
		printList(w, "  orphan", i.Orphan)
		for _, h := range i.Hooks {
			fmt.Fprintf(w, "  hook %s\n", h)
		}
		printList(w, "provides", i.Provides)
		for _, req := range i.Requires {
			fmt.Fprintf(w, "  requires %s (%s)\n", req.Instance, strings.Join(req.Kinds, ", "))
		}
		if i.Unchanged > 0 {
			fmt.Fprintf(w, "  = %d unchanged\n", i.Unchanged)
		}
		printList(w, "warning:", i.Warnings)
		for _, a := range i.Artifacts {
			fmt.Fprintf(w, "  artifact: %s\n", reconciler.ArtifactLine(a))
		}
		if i.Publish != "" {
			fmt.Fprintf(w, "  publish: %s (signed)\n", i.Publish)
		}
		for _, sp := range i.Secrets {
			fmt.Fprintf(w, "  generated secret: %s\n", secretgen.Line(sp))
		}
		if len(i.Prune) > 0 || (i.PruneVerdict != "" && i.PruneVerdict != "allowed") {
			fmt.Fprintf(w, "  prune: %s\n", i.PruneVerdict)
		}
		if i.Error != "" {
			fmt.Fprintf(w, "  error (%s): %s\n", i.Reason, i.Error)
		}
		if i.Diff != "" {
			fmt.Fprintf(w, "%s", i.Diff)
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
	_, err := io.WriteString(w, p.Markdown())
	return err
}

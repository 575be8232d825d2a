package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
)

func newStatusCommand(kube *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every instance with READY, REASON and REVISION",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := tableOrJSON(output); err != nil {
				return err
			}
			c, err := kube.client()
			if err != nil {
				return err
			}
			items, err := listInstances(cmd.Context(), c)
			if err != nil {
				return err
			}
			rows := statusRows(items)
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			var p cairnv1.Platform
			if err := c.Get(cmd.Context(), client.ObjectKey{Name: cairnv1.PlatformName}, &p); err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), sourceLine(&p))
			}
			return printStatusTable(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// tableOrJSON checks the --output of a command that prints a table or JSON.
func tableOrJSON(output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("--output must be table or json, not %q", output)
	}
	return nil
}

// listInstances lists the ModuleInstances of every namespace.
func listInstances(ctx context.Context, c client.Client) ([]cairnv1.ModuleInstance, error) {
	var list cairnv1.ModuleInstanceList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list ModuleInstances: %w", err)
	}
	return list.Items, nil
}

type statusRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Ready     string `json:"ready"`
	Reason    string `json:"reason"`
	Revision  string `json:"revision"`
	Objects   int32  `json:"objects"`
	// Verified is True, False or "-" (no OCI artifacts); the reason follows False.
	Verified string `json:"verified"`
	// Suspended is spec.suspend or the suspend annotation (cairn suspend): the
	// instance's objects are left as they are.
	Suspended bool `json:"suspended"`
	// Held is the render digest the instance is held at (cairn hold; "" when not
	// held), HeldSince since when.
	Held      string       `json:"held,omitempty"`
	HeldSince *metav1.Time `json:"heldSince,omitempty"`
	Message   string       `json:"message"`
}

func statusRows(items []cairnv1.ModuleInstance) []statusRow {
	rows := make([]statusRow, 0, len(items))
	for i := range items {
		mi := &items[i]
		row := statusRow{Namespace: mi.Namespace, Name: mi.Name, Ready: "Unknown", Revision: mi.Status.LastAppliedRevision}
		if c := conditions.Get(mi, "Ready"); c != nil {
			row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
		}
		if mi.Status.Inventory != nil {
			row.Objects = mi.Status.Inventory.Count
		}
		row.Suspended = mi.Spec.Suspend || mi.Annotations[cairnv1.SuspendAnnotation] == "true"
		if h := mi.Status.Held; h != nil {
			row.Held, row.HeldSince = h.RenderDigest, &h.Since
			if row.Held == "" {
				row.Held = h.Revision
			}
		}
		row.Verified = "-"
		if c := conditions.Get(mi, cairnv1.VerifiedCondition); c != nil {
			row.Verified = string(c.Status)
			if c.Status != "True" {
				row.Verified += " (" + c.Reason + ")"
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func printStatusTable(w io.Writer, rows []statusRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tREADY\tREASON\tREVISION\tOBJECTS\tVERIFIED\tSUSPENDED\tHELD\tMESSAGE")
	for _, r := range rows {
		rev := gitsource.ShortSHA(r.Revision)
		msg := r.Message
		if len(msg) > 100 {
			msg = msg[:97] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Namespace, r.Name, r.Ready, r.Reason, rev, r.Objects,
			r.Verified, suspendedMark(r.Suspended), heldMark(r.Held), msg)
	}
	return tw.Flush()
}

// suspendedMark is the SUSPENDED column: SUSPENDED for a suspended instance, else "-".
func suspendedMark(suspended bool) string {
	if suspended {
		return "SUSPENDED"
	}
	return "-"
}

// heldMark is the HELD column: the held render's digest, shortened, else "-".
func heldMark(digest string) string {
	if digest == "" {
		return "-"
	}
	_, hex, _ := strings.Cut(digest, ":")
	if hex == "" {
		hex = digest
	}
	return hex[:min(len(hex), 12)]
}

// sourceLine is the Platform's line of the status table: the repository, the
// revision last synced, and the last `cairn reconcile source` request, handled or
// pending.
func sourceLine(p *cairnv1.Platform) string {
	rev := gitsource.ShortSHA(p.Status.LastSyncedRevision)
	repo := p.Status.Repository
	if repo == "" {
		repo = "(a local directory)"
	}
	line := fmt.Sprintf("source: %s at %s", repo, rev)
	if at := p.Annotations[cairnv1.ReconcileRequestAnnotation]; at != "" {
		state := "pending"
		if at == p.Status.LastHandledReconcileAt {
			state = "handled"
		}
		line += fmt.Sprintf("; reconcile requested at %s: %s", at, state)
	}
	return line
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
)

func newHistoryCommand(kube *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history NAMESPACE/NAME",
		Short: "Show the renders last applied to one instance, newest first",
		Long: `cairn history lists the instance's status.history: each render applied, newest first, with the
revision it was first applied for, when, its result (Ready, Progressing, or Failed after its apply, with
the reason), its object count, its render digest and, when the Platform publishes renders, the
published artifact's manifest digest and the id of the key that signed it. An attempt that failed
before applying anything is not listed (cairn status shows the last failure).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := tableOrJSON(output); err != nil {
				return err
			}
			c, ns, name, err := instanceClient(kube, args[0])
			if err != nil {
				return err
			}
			var mi cairnv1.ModuleInstance
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, &mi); err != nil {
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("ModuleInstance %s/%s not found", ns, name)
				}
				return fmt.Errorf("failed to get ModuleInstance %s/%s: %w", ns, name, err)
			}
			history := mi.Status.History
			if output == "json" {
				if history == nil {
					history = []cairnv1.HistoryEntry{} // [] rather than null
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(history)
			}
			return printHistoryTable(cmd.OutOrStdout(), history)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// printHistoryTable prints one line per render applied, newest first.
func printHistoryTable(w io.Writer, history []cairnv1.HistoryEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tAPPLIED\tRESULT\tREASON\tOBJECTS\tRENDER\tARTIFACT\tKEY")
	for _, h := range history {
		artifact, key := "-", "-"
		if h.Published != nil {
			artifact, key = shortDigest(h.Published.Digest), orDash(h.Published.KeyID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", gitsource.ShortSHA(h.Revision),
			h.Time.UTC().Format(time.RFC3339), h.Result, orDash(h.Reason), h.Objects, shortDigest(h.RenderDigest), artifact, key)
	}
	return tw.Flush()
}

// shortDigest is algorithm:hex cut to 12 hex digits ("-" for none); -o json has
// them whole.
func shortDigest(d string) string {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok {
		return orDash(d)
	}
	return alg + ":" + hex[:min(len(hex), 12)]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

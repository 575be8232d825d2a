package reconciler

import (
	"fmt"
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/internal/graph"
	"cairn.dev/cairn/reconciler/secretgen"
)

// Markdown renders the plan for a pull request: a summary table (instances ×
// create/configure/prune counts), then one collapsible section per instance that
// changes or fails, with its objects, the prune guards' verdict, errors and the
// rendered diff.
func (p *Plan) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## cairn plan for `%s`", gitsource.ShortSHA(p.Revision))
	if p.Base != "" {
		fmt.Fprintf(&b, " (base `%s`)", gitsource.ShortSHA(p.Base))
	}
	b.WriteString("\n\n")
	if p.Error != "" {
		fmt.Fprintf(&b, "**The revision cannot be used:**\n\n```\n%s\n```\n", p.Error)
		return b.String()
	}
	b.WriteString("| instance | action | create | configure | prune | unchanged |\n|---|---|---:|---:|---:|---:|\n")
	for _, i := range p.Instances {
		fmt.Fprintf(&b, "| `%s/%s` | %s | %d | %d | %d | %d |\n", i.Namespace, i.Name, actionCell(i),
			len(i.Create), len(i.Configure), len(i.Prune), i.Unchanged)
	}
	for _, i := range p.Instances {
		if i.Reason == cairnv1.ReasonHeld {
			fmt.Fprintf(&b, "\n⏸️ `%s/%s` is %s.\n", i.Namespace, i.Name, i.Why)
		}
	}
	if pic := graph.Markdown(p.Graph, graph.DefaultMarkdownNodes); pic != "" {
		b.WriteString("\n### Order\n\n")
		b.WriteString(pic)
	}
	for _, i := range p.Instances {
		if i.changes() {
			b.WriteString(i.markdownSection())
		}
	}
	return b.String()
}

func actionCell(i InstancePlan) string {
	switch {
	case i.Error != "":
		return "**" + string(i.Action) + "** (" + i.Reason + ")"
	case i.Reason == cairnv1.ReasonHeld:
		return string(i.Action) + " (held)"
	case len(i.Warnings) > 0:
		return fmt.Sprintf("%s ⚠️ %d warning(s)", i.Action, len(i.Warnings))
	}
	return string(i.Action)
}

func (i InstancePlan) changes() bool {
	return len(i.Create)+len(i.Configure)+len(i.Prune)+len(i.Orphan)+len(i.Hooks) > 0 || i.Error != "" || i.Diff != "" || len(i.Artifacts) > 0 ||
		len(i.Warnings) > 0 || secretgen.PlansChange(i.Secrets)
}

func markdownArtifact(a cairnv1.ArtifactStatus) string {
	icon := map[string]string{
		cairnv1.VerificationVerified: "✅", cairnv1.VerificationFailed: "❌",
		cairnv1.VerificationUnverified: "⚠️", cairnv1.VerificationSkipped: "➖",
	}[a.Verification]
	return icon + " **" + a.Verification + "** `" + strings.TrimPrefix(ArtifactLine(a), a.Verification+" ") + "`"
}

func (i InstancePlan) markdownSection() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### `%s/%s`\n\n<details><summary>%s", i.Namespace, i.Name, i.Action)
	if i.Why != "" {
		fmt.Fprintf(&b, " (%s)", i.Why)
	}
	b.WriteString("</summary>\n\n")
	if i.Error != "" {
		fmt.Fprintf(&b, "**Error (%s):**\n\n```\n%s\n```\n\n", i.Reason, i.Error)
	}
	if len(i.Create)+len(i.Configure)+len(i.Prune) > 0 {
		b.WriteString("```diff\n")
		writeLines(&b, "+ ", i.Create)
		writeLines(&b, "! ", i.Configure)
		writeLines(&b, "- ", i.Prune)
		b.WriteString("```\n\n")
	}
	if len(i.Hooks) > 0 {
		fmt.Fprintf(&b, "**Helm hooks** (%d, run in this order; not in the inventory):\n\n```\n", len(i.Hooks))
		for _, h := range i.Hooks {
			b.WriteString(h.String() + "\n")
		}
		b.WriteString("```\n\n")
	}
	if len(i.Orphan) > 0 {
		fmt.Fprintf(&b, "**Orphan %d objects** (prune: false: they stay in the cluster, without cairn's labels):\n\n```\n", len(i.Orphan))
		writeLines(&b, "", i.Orphan)
		b.WriteString("```\n\n")
	}
	for _, w := range i.Warnings {
		fmt.Fprintf(&b, "- ⚠️ **Warning:** %s\n", w)
	}
	for _, a := range i.Artifacts {
		fmt.Fprintf(&b, "- Artifact: %s\n", markdownArtifact(a))
	}
	if i.Publish != "" {
		fmt.Fprintf(&b, "- Publishes: `%s` (signed)\n", i.Publish)
	}
	for _, sp := range i.Secrets {
		fmt.Fprintf(&b, "- Generated secret: **%s** `%s` (%s)\n", sp.Action, sp.Secret, sp.Why)
	}
	if len(i.Artifacts) > 0 || i.Publish != "" || len(i.Warnings) > 0 || len(i.Secrets) > 0 {
		b.WriteString("\n")
	}
	if i.PruneVerdict != "" && i.PruneVerdict != "allowed" {
		fmt.Fprintf(&b, "**Prune:** %s\n\n", i.PruneVerdict)
	}
	if i.Diff != "" {
		fmt.Fprintf(&b, "Rendered diff:\n\n```diff\n%s```\n\n", i.Diff)
	}
	b.WriteString("</details>\n")
	return b.String()
}

func writeLines(b *strings.Builder, prefix string, items []string) {
	for _, it := range items {
		b.WriteString(prefix + it + "\n")
	}
}

package graph

import (
	"fmt"
	"strings"
)

// DefaultMarkdownNodes is how many instances a plan comment draws at most.
const DefaultMarkdownNodes = 50

// Markdown returns a fenced Mermaid block of the graph for a pull request's
// plan. A graph of more than maxNodes instances is cut to the affected ones
// and their neighbours, with a note saying so; when even that is too large,
// only the note is written. An empty graph gives "".
func Markdown(g Graph, maxNodes int) string {
	g = g.Normalized()
	if len(g.Nodes) == 0 {
		return ""
	}
	note := ""
	if len(g.Nodes) > maxNodes {
		all := len(g.Nodes)
		g = g.Around()
		if len(g.Nodes) > maxNodes || len(g.Nodes) == 0 {
			return fmt.Sprintf("_The graph of %d instances (%d around this change) is too large to draw here (at most %d): run `cairn graph`._\n", all, len(g.Nodes), maxNodes)
		}
		note = fmt.Sprintf("_The affected instances and their neighbours: %d of %d instances (`cairn graph` draws them all)._\n\n", len(g.Nodes), all)
	}
	var b strings.Builder
	b.WriteString(note)
	b.WriteString("```mermaid\n")
	b.WriteString(g.mermaid())
	b.WriteString("```\n")
	return b.String()
}

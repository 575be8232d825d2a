package graph

import (
	"fmt"
	"slices"
	"strings"
)

// Format is a way to draw the graph.
type Format string

const (
	// Text lists the instances in apply order, each with what it comes after.
	Text Format = "text"
	// Mermaid is a Mermaid flowchart (GitHub, GitLab and Gitea render it in Markdown).
	Mermaid Format = "mermaid"
	// DOT is a Graphviz digraph.
	DOT Format = "dot"
)

// Formats lists the formats Draw knows, for flags and errors.
var Formats = []Format{Text, Mermaid, DOT}

// Draw draws the graph in format. Edges point from the instance that comes
// first (a dependency, a provider) to the one that comes after it.
func (g Graph) Draw(format Format) (string, error) {
	g = g.Normalized()
	switch format {
	case Text:
		return g.text(), nil
	case Mermaid:
		return g.mermaid(), nil
	case DOT:
		return g.dot(), nil
	}
	return "", fmt.Errorf("unknown graph format %q (one of %s)", format, formatList())
}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

func (g Graph) text() string {
	var b strings.Builder
	after := map[string][]Edge{}
	for _, e := range g.Edges {
		after[e.From] = append(after[e.From], e)
	}
	order, cyclic := g.applyOrder()
	for _, key := range order {
		n := g.node(key)
		fmt.Fprintf(&b, "%s%s\n", key, textMarks(n, cyclic[key]))
		for _, e := range after[key] {
			fmt.Fprintf(&b, "  after %s (%s)\n", e.To, edgeReason(e))
		}
	}
	return b.String()
}

func textMarks(n Node, cyclic bool) string {
	var marks []string
	if n.State != StateOK {
		marks = append(marks, string(n.State))
	}
	if n.Affected {
		marks = append(marks, "affected")
	}
	if cyclic {
		marks = append(marks, "in a cycle")
	}
	if len(marks) == 0 {
		return ""
	}
	return " [" + strings.Join(marks, ", ") + "]"
}

func edgeReason(e Edge) string {
	if e.Kind == Contract {
		return "provides " + e.Label
	}
	return string(e.Kind)
}

func (g Graph) node(key string) Node {
	i := slices.IndexFunc(g.Nodes, func(n Node) bool { return n.Key == key })
	return g.Nodes[i]
}

// applyOrder sorts the nodes so that each comes after what it depends on
// (ties by key); the nodes of a cycle come last, marked.
func (g Graph) applyOrder() ([]string, map[string]bool) {
	waits := map[string]int{}
	next := map[string][]string{}
	for _, e := range g.Edges {
		waits[e.From]++
		next[e.To] = append(next[e.To], e.From)
	}
	var ready, order []string
	for _, n := range g.Nodes {
		if waits[n.Key] == 0 {
			ready = append(ready, n.Key)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		key := ready[0]
		ready = ready[1:]
		order = append(order, key)
		for _, k := range next[key] {
			if waits[k]--; waits[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	cyclic := map[string]bool{}
	for _, n := range g.Nodes {
		if waits[n.Key] > 0 {
			cyclic[n.Key] = true
			order = append(order, n.Key)
		}
	}
	return order, cyclic
}

func (g Graph) mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	id := map[string]string{}
	classes := map[string][]string{}
	for i, n := range g.Nodes {
		id[n.Key] = fmt.Sprintf("n%d", i)
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", id[n.Key], mermaidText(n.Key))
		if n.State != StateOK {
			classes[strings.ToLower(string(n.State))] = append(classes[strings.ToLower(string(n.State))], id[n.Key])
		}
		if n.Affected {
			classes["affected"] = append(classes["affected"], id[n.Key])
		}
	}
	for _, e := range g.Edges {
		if e.Kind == Contract {
			fmt.Fprintf(&b, "  %s -.->|\"%s\"| %s\n", id[e.To], mermaidText(e.Label), id[e.From])
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", id[e.To], id[e.From])
		}
	}
	for _, c := range []struct{ name, style string }{
		{"failed", "fill:#fdd,stroke:#c00"},
		{"waiting", "fill:#ffd,stroke:#b80"},
		{"affected", "stroke-width:3px"},
	} {
		if ids := classes[c.name]; len(ids) > 0 {
			fmt.Fprintf(&b, "  classDef %s %s\n  class %s %s\n", c.name, c.style, strings.Join(ids, ","), c.name)
		}
	}
	return b.String()
}

// mermaidText escapes a label for a quoted Mermaid string: quotes and the
// characters Markdown or Mermaid would read as markup become entity codes.
func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "`", "#96;", "|", "#124;").Replace(s)
}

func (g Graph) dot() string {
	var b strings.Builder
	b.WriteString("digraph cairn {\n  rankdir=LR;\n  node [shape=box];\n")
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "  %s%s;\n", dotQuote(n.Key), dotNodeAttrs(n))
	}
	for _, e := range g.Edges {
		attrs := ""
		if e.Kind == Contract {
			attrs = fmt.Sprintf(" [style=dashed, label=%s]", dotQuote(e.Label))
		}
		fmt.Fprintf(&b, "  %s -> %s%s;\n", dotQuote(e.To), dotQuote(e.From), attrs)
	}
	b.WriteString("}\n")
	return b.String()
}

func dotNodeAttrs(n Node) string {
	var attrs []string
	switch n.State {
	case StateFailed:
		attrs = append(attrs, "color=red", "style=filled", `fillcolor="#ffdddd"`)
	case StateWaiting:
		attrs = append(attrs, "color=orange", "style=filled", `fillcolor="#ffffdd"`)
	}
	if n.Affected {
		attrs = append(attrs, "penwidth=3")
	}
	if len(attrs) == 0 {
		return ""
	}
	return " [" + strings.Join(attrs, ", ") + "]"
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

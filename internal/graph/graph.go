package graph

import (
	"cmp"
	"slices"
)

// State marks an instance that needs attention in a drawing.
type State string

const (
	// StateOK is an instance with nothing to mark.
	StateOK State = ""
	// StateFailed is an instance whose last sync (or render) failed.
	StateFailed State = "Failed"
	// StateWaiting is an instance waiting for a dependency or a provider.
	StateWaiting State = "Waiting"
	// StateUnknown is an instance whose state is not known to the reader (the
	// dashboard's, for an instance in a namespace the user may not see).
	StateUnknown State = "Unknown"
)

// EdgeKind tells why one instance comes after another.
type EdgeKind string

const (
	// DependsOn is an edge the instance's author declared (spec.dependsOn).
	DependsOn EdgeKind = "dependsOn"
	// Contract is an edge inferred from the renders: the instance renders
	// objects of a kind whose CRD the other instance provides.
	Contract EdgeKind = "contract"
)

// Node is one instance, keyed "namespace/name".
type Node struct {
	Key   string
	State State
	// Affected marks an instance the change at hand touches (a pull request's
	// plan draws these, and is cut to them when the graph is too large).
	Affected bool
}

// Edge says that From comes after To: From depends on To, or From uses a
// kind To provides (Label names the kind, e.g. Certificate.cert-manager.io).
type Edge struct {
	From  string
	To    string
	Kind  EdgeKind
	Label string
}

// Graph is a set of instances and the edges between them.
type Graph struct {
	Nodes []Node
	Edges []Edge
}

// Normalized returns the graph with its nodes sorted by key, one node per key
// (an edge's unknown end gets a node of its own), and its edges sorted and
// without repeats, so that every drawing of the same graph is the same text.
func (g Graph) Normalized() Graph {
	byKey := map[string]Node{}
	for _, n := range g.Nodes {
		byKey[n.Key] = n
	}
	for _, e := range g.Edges {
		for _, k := range []string{e.From, e.To} {
			if _, ok := byKey[k]; !ok {
				byKey[k] = Node{Key: k}
			}
		}
	}
	out := Graph{Nodes: make([]Node, 0, len(byKey))}
	for _, n := range byKey {
		out.Nodes = append(out.Nodes, n)
	}
	slices.SortFunc(out.Nodes, func(a, b Node) int { return cmp.Compare(a.Key, b.Key) })
	out.Edges = slices.Clone(g.Edges)
	slices.SortFunc(out.Edges, compareEdges)
	out.Edges = slices.Compact(out.Edges)
	return out
}

func compareEdges(a, b Edge) int {
	return cmp.Or(cmp.Compare(a.To, b.To), cmp.Compare(a.From, b.From), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Label, b.Label))
}

// Around returns the subgraph of the affected instances, the instances they
// come after and those that come after them (one edge away), with the edges
// among those.
func (g Graph) Around() Graph {
	keep := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Affected {
			keep[n.Key] = true
		}
	}
	near := map[string]bool{}
	for _, e := range g.Edges {
		if keep[e.From] || keep[e.To] {
			near[e.From], near[e.To] = true, true
		}
	}
	out := Graph{}
	for _, n := range g.Nodes {
		if keep[n.Key] || near[n.Key] {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, e := range g.Edges {
		if (keep[e.From] || near[e.From]) && (keep[e.To] || near[e.To]) {
			out.Edges = append(out.Edges, e)
		}
	}
	return out
}

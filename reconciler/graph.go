package reconciler

import (
	"context"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render/declarations"
)

// GraphOffline renders every instance of rev with no cluster access and returns
// the instance graph: dependsOn edges and the contract edges the renders imply
// (labelled with the kind). An instance that fails to render, or that provides a
// kind another instance provides too, is marked failed.
func GraphOffline(ctx context.Context, renderer Renderer, rev Revision, opts Options) (graph.Graph, error) {
	out, err := RenderOffline(ctx, renderer, rev, opts, "")
	if err != nil {
		return graph.Graph{}, err
	}
	return renderedGraph(out), nil
}

// renderedGraph is the graph of a set of offline renders.
func renderedGraph(out []Rendered) graph.Graph {
	var g graph.Graph
	objects := map[string][]*unstructured.Unstructured{}
	failed := map[string]bool{}
	for _, r := range out {
		key := r.Namespace + "/" + r.Name
		objects[key] = r.Objects
		failed[key] = r.Err != nil
		for _, d := range r.DependsOn {
			g.Edges = append(g.Edges, graph.Edge{From: key, To: d, Kind: graph.DependsOn})
		}
	}
	c := contracts.Infer(objects, nil)
	for _, gk := range c.Conflicts() {
		for _, key := range c.Conflicting(gk) {
			failed[key] = true
		}
	}
	g.Edges = append(g.Edges, c.Edges()...)
	for _, r := range out {
		key := r.Namespace + "/" + r.Name
		n := graph.Node{Key: key}
		if failed[key] {
			n.State = graph.StateFailed
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g
}

// planGraph is the graph of a plan: the declared instances with their dependsOn
// and contract edges, those the revision affects marked, and those whose plan is
// an error (failed) or that wait for a provider (waiting).
func (s *RevisionState) planGraph(plans []InstancePlan) graph.Graph {
	failed := map[string]bool{}
	for _, ip := range plans {
		failed[ip.Namespace+"/"+ip.Name] = ip.Action == outcome.PlanError
	}
	g := graph.Graph{Edges: s.contracts.Edges()}
	for _, r := range s.runs {
		n := graph.Node{Key: r.key(), Affected: r.affected}
		switch {
		case failed[r.key()]:
			n.State = graph.StateFailed
		case len(s.pendingProviders(r)) > 0:
			n.State = graph.StateWaiting
		}
		g.Nodes = append(g.Nodes, n)
		for _, d := range declarations.DependencyIDs(r.mi) {
			g.Edges = append(g.Edges, graph.Edge{From: r.key(), To: d, Kind: graph.DependsOn})
		}
	}
	return g.Normalized()
}

// MarkFromStatus marks on g the instances whose status in the cluster says they
// wait for a dependency or a provider (Ready False, DependencyNotReady or
// ProviderNotReady) or failed (Ready False for any other reason). An instance
// already marked failed (it does not render) stays so; an instance the cluster
// does not hold is left as it is.
func MarkFromStatus(g graph.Graph, live []cairnv1.ModuleInstance) graph.Graph {
	states := map[string]graph.State{}
	for i := range live {
		mi := &live[i]
		if !conditions.IsFalse(mi, "Ready") {
			continue
		}
		state := graph.StateFailed
		switch conditions.GetReason(mi, "Ready") {
		case cairnv1.ReasonDependencyNotReady, cairnv1.ReasonProviderNotReady:
			state = graph.StateWaiting
		}
		states[mi.Namespace+"/"+mi.Name] = state
	}
	out := graph.Graph{Edges: g.Edges}
	for _, n := range g.Nodes {
		if s, ok := states[n.Key]; ok && n.State != graph.StateFailed {
			n.State = s
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

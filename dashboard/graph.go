package dashboard

import (
	"context"
	"html/template"
	"net/url"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
)

// edgesOf are mi's edges: to what it declares it depends on, and to the
// instances that provide kinds it uses (status.requires).
func edgesOf(mi *cairnv1.ModuleInstance) []graph.Edge {
	key := mi.Namespace + "/" + mi.Name
	var out []graph.Edge
	for _, d := range mi.Spec.DependsOn {
		ns := d.Namespace
		if ns == "" {
			ns = mi.Namespace
		}
		out = append(out, graph.Edge{From: key, To: ns + "/" + d.Name, Kind: graph.DependsOn})
	}
	for _, r := range mi.Status.Requires {
		out = append(out, graph.Edge{From: key, To: r.Instance, Kind: graph.Contract, Label: strings.Join(r.Kinds, ", ")})
	}
	return out
}

// graphOf draws mi's place in the graph: what it comes after and what comes after
// it, among the instances id may see (an instance it depends on is named by its
// own spec, so it is drawn, linked only when visible).
func (s *Server) graphOf(ctx context.Context, id *Identity, mi *cairnv1.ModuleInstance) template.HTML {
	var list cairnv1.ModuleInstanceList
	if err := s.opts.Reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return ""
	}
	key := mi.Namespace + "/" + mi.Name
	namespaces := make([]string, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, list.Items[i].Namespace)
	}
	visible, err := s.visibleNamespaces(ctx, id, namespaces)
	if err != nil {
		return ""
	}
	state := map[string]graph.State{}
	for i := range list.Items {
		o := &list.Items[i]
		if visible(o.Namespace) {
			state[o.Namespace+"/"+o.Name] = stateOf(o)
		}
	}
	g := graph.Graph{Nodes: []graph.Node{{Key: key, State: stateOf(mi)}}, Edges: edgesOf(mi)}
	for i := range list.Items {
		o := &list.Items[i]
		if !visible(o.Namespace) || o.Namespace == mi.Namespace && o.Name == mi.Name {
			continue
		}
		for _, e := range edgesOf(o) {
			if e.To == key {
				g.Edges = append(g.Edges, e)
			}
		}
	}
	if len(g.Edges) == 0 {
		return ""
	}
	for _, e := range g.Edges {
		for _, k := range []string{e.From, e.To} {
			st, ok := state[k]
			if !ok {
				st = graph.StateUnknown // named by the instance's own spec, not visible: its state is not shown
			}
			if k != key {
				g.Nodes = append(g.Nodes, graph.Node{Key: k, State: st})
			}
		}
	}
	link := func(k string) string {
		ns, name, _ := strings.Cut(k, "/")
		if _, ok := state[k]; !ok || k == key {
			return ""
		}
		return "/instances/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
	}
	// SVG escapes every text itself (internal/graph): it is safe to embed as is.
	return template.HTML(g.SVG(key, link)) //nolint:gosec // escaped by graph.SVG
}

func stateOf(mi *cairnv1.ModuleInstance) graph.State {
	switch c := conditions.Get(mi, "Ready"); {
	case c == nil:
		return graph.StateWaiting
	case c.Status == "False" && !conditions.IsTrue(mi, "Reconciling"):
		return graph.StateFailed
	case c.Status != "True":
		return graph.StateWaiting
	}
	return graph.StateOK
}

package declarations

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	instancegraph "cairn.dev/cairn/internal/graph"
)

// graph is the dependsOn graph of the decoded instances, valid or not, with edges to
// declared instances only (an undeclared one is a dangling reference).
type graph struct {
	ids   []string
	edges map[string][]string
}

func (l *loader) graph() graph {
	g := graph{edges: map[string][]string{}}
	for _, e := range l.declared {
		id := e.doc.object()
		g.ids = append(g.ids, id)
		if e.obj == nil {
			continue
		}
		for _, dep := range DependencyIDs(e.obj.(*cairnv1.ModuleInstance)) {
			if l.instances[dep] != nil && !slices.Contains(g.edges[id], dep) {
				g.edges[id] = append(g.edges[id], dep)
			}
		}
	}
	slices.SortFunc(g.ids, compareIDs)
	return g
}

// checkCycles marks every instance on a dependsOn cycle invalid, naming the cycle.
func (l *loader) checkCycles() {
	g := l.graph()
	for _, scc := range g.components() {
		if len(scc) == 1 && !slices.Contains(g.edges[scc[0]], scc[0]) {
			continue
		}
		for _, id := range scc {
			l.cycleError(g, id, scc)
		}
	}
}

func (l *loader) cycleError(g graph, id string, scc []string) {
	cycle := g.shortestCycle(id, scc)
	e := l.instances[id]
	index := slices.Index(DependencyIDs(e.obj.(*cairnv1.ModuleInstance)), cycle[1])
	// Name the cycle from its smallest member, so that all its instances report it alike.
	start := slices.Index(cycle, slices.MinFunc(cycle[:len(cycle)-1], compareIDs))
	named := append(slices.Clone(cycle[start:len(cycle)-1]), cycle[:start+1]...)
	e.errs = append(e.errs, e.doc.errorAt(problem{ReasonDependencyCycle, fmt.Sprintf("spec.dependsOn[%d]", index),
		"dependency cycle: " + strings.Join(named, " -> ")}))
}

// shortestCycle returns the shortest path id -> ... -> id inside the component scc.
func (g graph) shortestCycle(id string, scc []string) []string {
	parent := map[string]string{}
	queue := []string{id}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range g.edges[u] {
			if v == id {
				return pathTo(parent, id, u)
			}
			if _, seen := parent[v]; !seen && slices.Contains(scc, v) {
				parent[v] = u
				queue = append(queue, v)
			}
		}
	}
	return []string{id, id}
}

// pathTo returns id -> ... -> last -> id following parent links back from last.
func pathTo(parent map[string]string, id, last string) []string {
	path := []string{id}
	for v := last; v != id; v = parent[v] {
		path = append(path, v)
	}
	slices.Reverse(path[1:])
	return append(path, id)
}

// components returns the strongly connected components of g, members sorted.
func (g graph) components() [][]string {
	sccs := instancegraph.Components(g.ids, g.edges)
	for _, scc := range sccs {
		slices.SortFunc(scc, compareIDs)
	}
	return sccs
}

// fillInstances orders the valid instances by dependsOn (Kahn's algorithm, ties by
// namespace/name) and indexes them.
func (l *loader) fillInstances() {
	g := l.graph()
	s := l.set
	s.instances, s.dependents, s.tenants = map[string]*cairnv1.ModuleInstance{}, map[string][]string{}, map[string]*cairnv1.Tenant{}
	pending := map[string]int{}
	for _, id := range g.ids {
		for _, dep := range g.edges[id] {
			s.dependents[dep] = append(s.dependents[dep], id)
		}
		if e := l.instances[id]; e.valid() {
			s.instances[id] = e.obj.(*cairnv1.ModuleInstance)
			if e.owner != nil {
				s.tenants[id] = e.owner
			}
			pending[id] = 0
		}
	}
	ready := &idHeap{}
	for id := range pending {
		for _, dep := range g.edges[id] {
			if _, ok := pending[dep]; ok {
				pending[id]++
			}
		}
		if pending[id] == 0 {
			heap.Push(ready, id)
		}
	}
	for ready.Len() > 0 {
		id := heap.Pop(ready).(string)
		s.Instances = append(s.Instances, s.instances[id])
		for _, dependent := range s.dependents[id] {
			if _, ok := pending[dependent]; ok {
				if pending[dependent]--; pending[dependent] == 0 {
					heap.Push(ready, dependent)
				}
			}
		}
	}
}

// idHeap is a min-heap of instance ids.
type idHeap []string

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return lessID(h[i], h[j]) }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// compareIDs orders namespace/name ids by namespace, then name.
func compareIDs(a, b string) int {
	nsA, nameA, _ := strings.Cut(a, "/")
	nsB, nameB, _ := strings.Cut(b, "/")
	if c := strings.Compare(nsA, nsB); c != 0 {
		return c
	}
	return strings.Compare(nameA, nameB)
}

func lessID(a, b string) bool { return compareIDs(a, b) < 0 }

package graph

// Components returns the strongly connected components of the directed graph
// whose edges map each node to the nodes it points to (Tarjan's algorithm),
// visiting roots in the order nodes gives them. Members of a component are in the
// order the algorithm closes them; callers sort as they need.
func Components(nodes []string, edges map[string][]string) [][]string {
	t := tarjan{edges: edges, index: map[string]int{}, low: map[string]int{}, onStack: map[string]bool{}}
	for _, v := range nodes {
		if _, seen := t.index[v]; !seen {
			t.visit(v)
		}
	}
	return t.out
}

type tarjan struct {
	edges      map[string][]string
	index, low map[string]int
	onStack    map[string]bool
	stack      []string
	out        [][]string
}

func (t *tarjan) visit(v string) {
	t.index[v], t.low[v] = len(t.index), len(t.index)
	t.stack = append(t.stack, v)
	t.onStack[v] = true
	for _, w := range t.edges[v] {
		if _, seen := t.index[w]; !seen {
			t.visit(w)
			t.low[v] = min(t.low[v], t.low[w])
		} else if t.onStack[w] {
			t.low[v] = min(t.low[v], t.index[w])
		}
	}
	if t.low[v] != t.index[v] {
		return
	}
	var comp []string
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[w] = false
		comp = append(comp, w)
		if w == v {
			break
		}
	}
	t.out = append(t.out, comp)
}

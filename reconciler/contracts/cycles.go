package contracts

import (
	"maps"
	"slices"
	"strings"

	"cairn.dev/cairn/internal/graph"
)

// Cycles returns the cycles that dependsOn and contract edges make together: the
// strongly connected components of more than one node of the graph edges
// describes. Each is sorted, and they are sorted by their first node.
func Cycles(edges map[string][]string) [][]string {
	var out [][]string
	for _, comp := range graph.Components(slices.Sorted(maps.Keys(edges)), edges) {
		if len(comp) > 1 {
			slices.Sort(comp)
			out = append(out, comp)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

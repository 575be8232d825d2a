package graph

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
)

func TestComponents(t *testing.T) {
	g := NewWithT(t)
	comps := Components([]string{"a", "b", "c", "d", "e"}, map[string][]string{
		"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"},
	})
	for _, c := range comps {
		slices.Sort(c)
	}
	g.Expect(comps).To(ConsistOf([]string{"a", "b", "c"}, []string{"d", "e"}))
	g.Expect(Components([]string{"x", "y"}, map[string][]string{"x": {"y"}})).To(Equal([][]string{{"y"}, {"x"}}),
		"a graph without cycles has one component per node, each closed after those it points to")
}

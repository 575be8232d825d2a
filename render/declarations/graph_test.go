package declarations

import (
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

// dependent returns an instance of team-a that depends on the given team-a instances.
func dependent(name string, deps ...string) string {
	spec := []string{"  module: {local: {path: x}}"}
	if len(deps) > 0 {
		spec = append(spec, "  dependsOn:")
		for _, d := range deps {
			spec = append(spec, "    - name: "+d)
		}
	}
	return instanceDoc("team-a", name, spec...)
}

func TestDependencyCycles(t *testing.T) {
	cases := []struct {
		name    string
		docs    []string
		cycle   map[string]string // instance -> message
		line    map[string]int
		valid   []string
		message string
	}{
		{
			name:  "two instances",
			docs:  []string{dependent("a", "b"), dependent("b", "a"), dependent("c", "a")},
			cycle: map[string]string{"a": "team-a/a -> team-a/b -> team-a/a", "b": "team-a/a -> team-a/b -> team-a/a"},
			line:  map[string]int{"a": 9, "b": 19},
			valid: []string{"c"},
		},
		{
			name:  "self",
			docs:  []string{dependent("a", "podinfo", "a")},
			cycle: map[string]string{"a": "team-a/a -> team-a/a"},
			line:  map[string]int{"a": 10},
		},
		{
			name:  "three instances and a branch",
			docs:  []string{dependent("c", "a"), dependent("a", "b"), dependent("b", "d", "c"), dependent("d")},
			cycle: map[string]string{"a": "team-a/a -> team-a/b -> team-a/c -> team-a/a", "b": "team-a/a -> team-a/b -> team-a/c -> team-a/a", "c": "team-a/a -> team-a/b -> team-a/c -> team-a/a"},
			line:  map[string]int{"c": 9, "a": 19, "b": 30},
			valid: []string{"d"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, with(map[string]string{"instances/cycle.yaml": strings.Join(tc.docs, "---\n")}))

			errs := errorsIn(set, "instances/cycle.yaml")
			g.Expect(errs).To(HaveLen(len(tc.cycle)))
			for _, e := range errs {
				name := strings.TrimPrefix(e.Object, "team-a/")
				g.Expect(e.Reason).To(Equal(ReasonDependencyCycle))
				g.Expect(e.Message).To(Equal("dependency cycle: "+tc.cycle[name]), name)
				g.Expect(e.Line).To(Equal(tc.line[name]), name)
				g.Expect(e.Field).To(HavePrefix("spec.dependsOn["))
				g.Expect(set.Instance("team-a", name)).To(BeNil())
			}
			for _, name := range tc.valid {
				g.Expect(set.Instance("team-a", name)).NotTo(BeNil(), "an instance depending on a cycle stays valid")
			}
		})
	}
}

func TestCycleThroughAnInvalidInstance(t *testing.T) {
	g := NewWithT(t)
	broken := instanceDoc("team-a", "b", "  module: {local: {path: x}}", "  drift: Never", "  dependsOn: [{name: a}]")
	set := mustLoad(t, with(map[string]string{"instances/cycle.yaml": dependent("a", "b") + "---\n" + broken}))

	var reasons []string
	for _, e := range errorsIn(set, "instances/cycle.yaml") {
		reasons = append(reasons, e.Object+" "+e.Reason)
	}
	g.Expect(reasons).To(ConsistOf("team-a/a DependencyCycle", "team-a/b InvalidDeclaration", "team-a/b DependencyCycle"))
}

func TestLongDependencyChain(t *testing.T) {
	g := NewWithT(t)
	var docs []string
	const n = 2000
	for i := range n {
		name := "i" + strconv.Itoa(i)
		if i == 0 {
			docs = append(docs, dependent(name))
			continue
		}
		docs = append(docs, dependent(name, "i"+strconv.Itoa(i-1)))
	}
	fsys := withPlatform("spec:", "spec:\n  limits: {maxFileDocuments: 5000}")
	fsys["instances/chain.yaml"] = &fstest.MapFile{Data: []byte(strings.Join(docs, "---\n"))}
	set := mustLoad(t, fsys)

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(set.Instances).To(HaveLen(n + 3))
	g.Expect(set.Dependents("team-a", "i0")).To(HaveLen(n - 1))
	var order []string
	for _, mi := range set.Instances {
		if strings.HasPrefix(mi.Name, "i") {
			order = append(order, mi.Name)
		}
	}
	g.Expect(order[0]).To(Equal("i0"))
	g.Expect(order[n-1]).To(Equal("i" + strconv.Itoa(n-1)))
}

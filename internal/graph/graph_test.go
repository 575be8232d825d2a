package graph

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// platformGraph is a provider, its requirers (one failed, one waiting), a
// dependsOn chain and an instance alone.
func platformGraph() Graph {
	return Graph{
		Nodes: []Node{
			{Key: "team-a/web", State: StateFailed, Affected: true},
			{Key: "infra/cert-manager", Affected: true},
			{Key: "team-a/db"},
			{Key: "team-b/api", State: StateWaiting},
			{Key: "team-c/alone"},
		},
		Edges: []Edge{
			{From: "team-a/web", To: "infra/cert-manager", Kind: Contract, Label: "Certificate.cert-manager.io"},
			{From: "team-a/web", To: "team-a/db", Kind: DependsOn},
			{From: "team-b/api", To: "infra/cert-manager", Kind: Contract, Label: "Issuer.cert-manager.io"},
			{From: "team-a/web", To: "team-a/db", Kind: DependsOn},
		},
	}
}

func expectGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "run go test ./internal/graph -update")
	NewWithT(t).Expect(got).To(Equal(string(want)), "differs from %s (run with -update if intended)", path)
}

func TestDrawGolden(t *testing.T) {
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			out, err := platformGraph().Draw(f)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			expectGolden(t, "platform."+string(f), out)
		})
	}
}

func TestDrawIsIndependentOfInputOrder(t *testing.T) {
	g := NewWithT(t)
	a := platformGraph()
	b := platformGraph()
	for i, j := 0, len(b.Nodes)-1; i < j; i, j = i+1, j-1 {
		b.Nodes[i], b.Nodes[j] = b.Nodes[j], b.Nodes[i]
	}
	b.Edges[0], b.Edges[2] = b.Edges[2], b.Edges[0]
	for _, f := range Formats {
		x, _ := a.Draw(f)
		y, _ := b.Draw(f)
		g.Expect(y).To(Equal(x), string(f))
	}
}

func TestTextOrderAndCycles(t *testing.T) {
	g := NewWithT(t)
	out, err := Graph{Edges: []Edge{
		{From: "ns/a", To: "ns/b", Kind: DependsOn},
		{From: "ns/b", To: "ns/a", Kind: Contract, Label: "Widget.example.com"},
		{From: "ns/c", To: "ns/z", Kind: DependsOn},
	}}.Draw(Text)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("ns/z\nns/c\n  after ns/z (dependsOn)\n" +
		"ns/a [in a cycle]\n  after ns/b (dependsOn)\n" +
		"ns/b [in a cycle]\n  after ns/a (provides Widget.example.com)\n"))
}

func TestDrawRefusesAnUnknownFormat(t *testing.T) {
	_, err := platformGraph().Draw("svg")
	NewWithT(t).Expect(err).To(MatchError(`unknown graph format "svg" (one of text, mermaid, dot)`))
}

func TestLabelsAreEscaped(t *testing.T) {
	g := NewWithT(t)
	gr := Graph{Edges: []Edge{{From: "a/b", To: `x/"y"`, Kind: Contract, Label: "K|<b>`"}}}
	m, _ := gr.Draw(Mermaid)
	g.Expect(m).To(ContainSubstring(`["x/#quot;y#quot;"]`))
	g.Expect(m).To(ContainSubstring(`-.->|"K#124;#lt;b#gt;#96;"|`))
	d, _ := gr.Draw(DOT)
	g.Expect(d).To(ContainSubstring(`"x/\"y\"" -> "a/b"`))
}

func TestMarkdownIsBounded(t *testing.T) {
	g := NewWithT(t)
	small := Markdown(platformGraph(), 10)
	g.Expect(small).To(HavePrefix("```mermaid\nflowchart LR\n"))
	g.Expect(small).To(HaveSuffix("```\n"))
	g.Expect(Markdown(Graph{}, 10)).To(BeEmpty())

	// Above the limit: the affected instances and their neighbours only.
	big := platformGraph()
	for i := range 30 {
		big.Nodes = append(big.Nodes, Node{Key: "fleet/app-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)})
	}
	cut := Markdown(big, 10)
	g.Expect(cut).To(HavePrefix("_The affected instances and their neighbours: 4 of 35 instances"))
	g.Expect(cut).To(ContainSubstring(`"team-b/api"`), "a requirer of an affected provider")
	g.Expect(cut).NotTo(ContainSubstring("fleet/"))
	g.Expect(cut).NotTo(ContainSubstring("team-c/alone"))

	// Even the affected part too large: a note only.
	g.Expect(Markdown(big, 3)).To(Equal("_The graph of 35 instances (4 around this change) is too large to draw here (at most 3): run `cairn graph`._\n"))
}

// TestSVG: each instance after what it comes after, an arrow per edge (a
// contract's dashed and labelled), links, states, and every text escaped.
func TestSVG(t *testing.T) {
	g := Graph{
		Nodes: []Node{{Key: "apps/web", State: StateFailed}, {Key: "infra/cert-manager"}, {Key: `apps/<script>`}},
		Edges: []Edge{
			{From: "apps/web", To: "infra/cert-manager", Kind: Contract, Label: "Certificate.cert-manager.io"},
			{From: `apps/<script>`, To: "apps/web", Kind: DependsOn},
		},
	}
	svg := g.SVG("apps/web", func(k string) string { return "/instances/" + k })
	for _, want := range []string{
		`<a href="/instances/apps/web">`, `stroke="#b3261e"`, `stroke-dasharray="5,4"`, `>Certificate.cert-manager.io</text>`,
		`apps/&lt;script&gt;`, `font-weight="700" fill="#1d2430">apps/web</text>`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the drawing lacks %s:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "<script>") || strings.Contains(svg, "style=") {
		t.Errorf("unescaped text or an inline style:\n%s", svg)
	}
	// cert-manager (column 0) before web (1) before <script> (2).
	if !strings.Contains(svg, `x="16" y="16" width="240"`) || !strings.Contains(svg, `x="366"`) || !strings.Contains(svg, `x="716"`) {
		t.Errorf("not three columns:\n%s", svg)
	}
}

package forge_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/github"
)

// plan builds a plan comment like the engine's: a summary table, then one
// <details> section per instance with a diff.
func plan(instances, diffLines int) string {
	var b strings.Builder
	b.WriteString("## cairn plan\n\n| instance | create | configure | prune |\n|---|---|---|---|\n")
	for i := 0; i < instances; i++ {
		fmt.Fprintf(&b, "| apps/app-%d | 1 | 2 | 0 |\n", i)
	}
	for i := 0; i < instances; i++ {
		fmt.Fprintf(&b, "\n<details><summary><code>apps/app-%d</code>: 1 to create</summary>\n\n```diff\n", i)
		for l := 0; l < diffLines; l++ {
			fmt.Fprintf(&b, "+  replicas: %d\n", l)
		}
		b.WriteString("```\n</details>\n")
	}
	return b.String()
}

func TestCutCommentKeepsWholeSections(t *testing.T) {
	g := NewWithT(t)
	body := plan(10, 50)
	out := forge.CutComment(body, len(body)/2)
	g.Expect(len(out)).To(BeNumerically("<=", len(body)/2))
	g.Expect(out).To(HavePrefix("## cairn plan\n"))
	g.Expect(out).To(ContainSubstring("| apps/app-9 |"), "the summary table is whole")
	g.Expect(strings.Count(out, "<details>")).To(Equal(strings.Count(out, "</details>")))
	g.Expect(strings.Count(out, "```") % 2).To(Equal(0))
	g.Expect(out).To(MatchRegexp(`left out \d+ of 11 sections \(\d+ bytes\): ` + "`apps/app-\\d+: 1 to create`"))
	kept := strings.Count(out, "<details>")
	g.Expect(kept).To(BeNumerically(">=", 3))
	g.Expect(out).To(ContainSubstring(fmt.Sprintf("left out %d of 11", 10-kept)))
}

func TestCutCommentUnchangedWhenItFits(t *testing.T) {
	g := NewWithT(t)
	body := plan(3, 3)
	g.Expect(forge.CutComment(body, len(body))).To(Equal(body))
}

func TestCutCommentCutsInsideAHugeFirstSection(t *testing.T) {
	g := NewWithT(t)
	body := "```diff\n" + strings.Repeat("+ line of a giant diff\n", 5000) + "```\n# next\nmore\n"
	out := forge.CutComment(body, 4000)
	g.Expect(len(out)).To(BeNumerically("<=", 4000))
	g.Expect(out).To(HavePrefix("```diff\n+ line"))
	g.Expect(strings.Count(out, "```")%2).To(Equal(0), "the open code fence is closed")
	g.Expect(out).To(ContainSubstring(`cut inside "section 1" and left out 1 of 2 sections`))
	g.Expect(out).To(ContainSubstring("`next`"))
}

func TestCutCommentClosesDetails(t *testing.T) {
	g := NewWithT(t)
	body := "<details><summary>big</summary>\n\n" + strings.Repeat("row\n", 3000) + "</details>\n"
	out := forge.CutComment(body, 2000)
	g.Expect(len(out)).To(BeNumerically("<=", 2000))
	g.Expect(strings.Count(out, "<details>")).To(Equal(strings.Count(out, "</details>")))
}

func TestCutCommentHeadingsInsideFencesAreNotBoundaries(t *testing.T) {
	g := NewWithT(t)
	body := "# a\n```yaml\n# comment in yaml\nkey: value\n```\n" + strings.Repeat("x\n", 10) + "# b\n" + strings.Repeat("y", 500) + "\n"
	out := forge.CutComment(body, 300)
	g.Expect(out).To(ContainSubstring("# comment in yaml\nkey: value\n```"))
	g.Expect(out).To(ContainSubstring("left out 1 of 2 sections"))
}

func TestCutCommentTinyLimits(t *testing.T) {
	g := NewWithT(t)
	body := plan(5, 20)
	for _, limit := range []int{0, 1, 10, 100, 200} {
		out := forge.CutComment(body, limit)
		g.Expect(len(out)).To(BeNumerically("<=", limit), "limit %d", limit)
		g.Expect(utf8.ValidString(out)).To(BeTrue())
	}
}

func TestPlanComment(t *testing.T) {
	g := NewWithT(t)
	out := forge.PlanComment(plan(50, 100), github.CommentLimit)
	g.Expect(out).To(HavePrefix(forge.PlanMarker + "\n## cairn plan"))
	g.Expect(len(out)).To(BeNumerically("<=", github.CommentLimit))
	g.Expect(forge.IsPlanComment(out)).To(BeTrue())
	g.Expect(forge.PlanComment(out, github.CommentLimit)).To(HavePrefix(forge.PlanMarker+"\n## cairn"), "no second marker")
	g.Expect(forge.IsPlanComment("> " + forge.PlanMarker + "\nquoted")).To(BeFalse())
}

func FuzzCutComment(f *testing.F) {
	f.Add(plan(3, 5), 200)
	f.Add("```\n# x\n<details>\n", 5)
	f.Add("héllo wörld ✓ 😀\n# a\n", 7)
	f.Fuzz(func(t *testing.T, body string, limit int) {
		limit %= 1 << 16
		out := forge.CutComment(body, limit)
		if len(body) <= limit && out != body {
			t.Fatalf("a body that fits was changed")
		}
		if len(out) > max(limit, 0) {
			t.Fatalf("len %d > limit %d", len(out), limit)
		}
		if utf8.ValidString(body) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from valid input")
		}
	})
}

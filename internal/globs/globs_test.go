package globs

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestNamespaceOverlap(t *testing.T) {
	cases := []struct {
		a, b, example string // example "" : they do not overlap
	}{
		{"team-a-*", "team-a-pay", "team-a-pay"},
		{"team-a-*", "team-a", ""},
		{"team-a", "team-a", "team-a"},
		{"team-*", "*-prod", "team-prod"},
		{"team-a-*", "team-*-pay", "team-a-pay"},
		{"*", "kube-system", "kube-system"},
		{"*", "*", "a"},
		{"a*", "*-", ""}, // only "a-", which is no namespace
		{"Team-*", "team-*", ""},
		{"team-?", "team-ab", ""},
		{"team-?", "team-[ab]", "team-a"},
		{"team-[^a]", "team-a", ""},
		{"team-[^a-y]", "team-*", "team-z"},
		{"[0-9]*", "a*", ""},
		{`team\-a`, "team-a", "team-a"},
		{"a_*", "a*", ""}, // '_' is not in a namespace
		{"*" + strings.Repeat("a", 60) + "*", "b*", "b" + strings.Repeat("a", 60)},
		{"*" + strings.Repeat("a", 63) + "*", "b*", ""}, // 64 characters at least
	}
	for _, tc := range cases {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			g := NewWithT(t)
			for _, pair := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
				example, ok, err := Overlap(Namespace, pair[0], pair[1])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(Equal(tc.example != ""), "%q and %q: %q", pair[0], pair[1], example)
				g.Expect(example).To(Equal(tc.example))
			}
		})
	}
}

func TestPathOverlap(t *testing.T) {
	cases := []struct {
		a, b, example string
	}{
		{"tenants/team-a/**", "tenants/team-b/**", ""},
		{"tenants/team-a/**", "tenants/*/app.yaml", "tenants/team-a/app.yaml"},
		{"tenants/team-a/**", "tenants/team-a", "tenants/team-a"},
		{"tenants/team-a/**", "tenants/team-ab/**", ""},
		{"tenants/team-a*/**", "tenants/team-ab/**", "tenants/team-ab"},
		{"**/a.yaml", "x/**", "x/a.yaml"},
		{"**", "a/b", "a/b"},
		{"a/**/b", "a/b", "a/b"},
		{"a/**/b", "a/c/**", "a/c/b"},
		{"a/*/b", "a/b", ""},
		{"a/*", "a/b/c", ""},
		{"a/**", "b/**", ""},
		{"{a,b}/x", "b/*", "b/x"},
		{"{a,b/c}/d", "b/**/d", "b/c/d"},
		{"a/{**,x}/b", "a/q/r/b", "a/q/r/b"},
		{"a/[!b]/c", "a/b/c", ""},
		{"a/[!b]/c", "a/*/c", "a/a/c"},
		{"a/**.yaml", "a/b/c.yaml", ""}, // ** inside a segment is *
		{"a/./b", "a/*/b", ""},          // no clean path has a "." segment
		{`a/\*`, "a/b", ""},
		{`a/\*`, "a/*", "a/*"},
	}
	for _, tc := range cases {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			g := NewWithT(t)
			for _, pair := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
				example, ok, err := Overlap(Path, pair[0], pair[1])
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ok).To(Equal(tc.example != ""), "%q and %q: %q", pair[0], pair[1], example)
				if tc.example != "" {
					g.Expect(len(example)).To(BeNumerically("<=", len(tc.example)), "one of the shortest: %q", example)
				}
			}
		})
	}
}

func TestTooManyAlternativesIsAnError(t *testing.T) {
	g := NewWithT(t)
	_, _, err := Overlap(Path, strings.Repeat("{a,b}", 7), "x")
	g.Expect(errors.Is(err, ErrTooComplex)).To(BeTrue(), "%v", err)
	_, ok, err := Overlap(Path, strings.Repeat("{a,b}", 6), "bbbbbb")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
}

// accepts runs automaton a on s.
func accepts(a *nfa, s string) bool {
	cur := closure(a, map[int]bool{a.start: true})
	for _, r := range s {
		next := map[int]bool{}
		for q := range cur {
			for _, e := range a.states[q].edges {
				if e.p.has(r) {
					next[e.to] = true
				}
			}
		}
		cur = closure(a, next)
	}
	for q := range cur {
		if a.accept[q] {
			return true
		}
	}
	return false
}

func closure(a *nfa, qs map[int]bool) map[int]bool {
	stack := make([]int, 0, len(qs))
	for q := range qs {
		stack = append(stack, q)
	}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range a.states[q].eps {
			if !qs[t] {
				qs[t] = true
				stack = append(stack, t)
			}
		}
	}
	return qs
}

func TestUnsupportedGlobs(t *testing.T) {
	g := NewWithT(t)
	for p, want := range map[string]string{
		"{0*{*}}":           "braces inside braces",
		"a/{b,{c,d}}/**":    "braces inside braces",
		"**\\/**":           "an escaped /",
		"a/***":             "three or more stars",
		"tenants/{a,b}/**":  "",
		"tenants/[{]x}/**":  "",
		"tenants/team-a/**": "",
	} {
		if want == "" {
			g.Expect(Unsupported(p)).To(BeEmpty(), p)
		} else {
			g.Expect(Unsupported(p)).To(ContainSubstring(want), p)
		}
	}
}

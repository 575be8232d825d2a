package forge_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"plain", "token abc123 in text", []string{"abc123"}, "token [REDACTED] in text"},
		{"url escaped", "https://x/?t=a%2Fb%2Bc", []string{"a/b+c"}, "https://x/?t=[REDACTED]"},
		{"longest first", "secret-and-more", []string{"secret", "secret-and-more"}, "[REDACTED]"},
		{"empty secret ignored", "keep", []string{""}, "keep"},
		{"several", "a=s1 b=s2", []string{"s1", "s2"}, "a=[REDACTED] b=[REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(forge.Redact(tt.in, tt.secrets...)).To(Equal(tt.want))
		})
	}
}

func TestDescription(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"fits", "apply succeeded", 140, "apply succeeded"},
		{"one line", "render failed:\n\tinstances/web.yaml:3: bad\r\n", 140, "render failed: instances/web.yaml:3: bad"},
		{"cut between words", "the quick brown fox jumps over the lazy dog", 20, "the quick brown…"},
		{"secret", "pull failed: password hunter2hunter2", 140, "pull failed: password [REDACTED]"},
		{"multibyte", strings.Repeat("é", 100), 11, "éééé…"},
		{"invalid utf8", "bad \xff byte", 140, "bad \uFFFD byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := forge.Description(tt.in, tt.limit, "hunter2hunter2")
			g.Expect(got).To(Equal(tt.want))
			g.Expect(len(got)).To(BeNumerically("<=", tt.limit))
			g.Expect(utf8.ValidString(got)).To(BeTrue())
		})
	}
}

func TestRepoRef(t *testing.T) {
	g := NewWithT(t)
	r, err := forge.ParseRepoRef("group/sub/project")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r).To(Equal(forge.RepoRef{Owner: "group/sub", Name: "project"}))
	for _, bad := range []string{"noslash", "/name", "owner/", "a/../b", "own er/x", "a//b", "a/\x00"} {
		_, err := forge.ParseRepoRef(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	g.Expect(forge.ValidateSHA(strings.Repeat("a", 40))).To(Succeed())
	g.Expect(forge.ValidateSHA(strings.Repeat("a", 64))).To(Succeed())
	g.Expect(forge.ValidateSHA(strings.Repeat("g", 40))).NotTo(Succeed())
}

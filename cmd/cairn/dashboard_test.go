package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestCommitURLs: a commit links to the forge's page of it, from the repository's
// URL as GitHub, GitLab and Gitea lay it out, or from the template given.
func TestCommitURLs(t *testing.T) {
	g := NewWithT(t)
	for repo, want := range map[string]string{
		"https://github.com/acme/platform.git":        "https://github.com/acme/platform/commit/abc",
		"https://gitea.example.com:3000/ops/platform": "https://gitea.example.com:3000/ops/platform/commit/abc",
		"git@gitlab.com:acme/infra/platform.git":      "https://gitlab.com/acme/infra/platform/commit/abc",
		"ssh://git@github.com:22/acme/platform.git":   "https://github.com/acme/platform/commit/abc",
		"http://127.0.0.1:3000/ops/platform.git":      "http://127.0.0.1:3000/ops/platform/commit/abc",
	} {
		f := commitURLs("", repo)
		g.Expect(f).NotTo(BeNil(), repo)
		g.Expect(f("abc")).To(Equal(want), repo)
	}
	g.Expect(commitURLs("", "file:///srv/platform")).To(BeNil())
	g.Expect(commitURLs("", "")).To(BeNil())
	g.Expect(commitURLs("https://cgit.example.com/platform/commit/?id={sha}", "file:///x")("abc")).To(Equal("https://cgit.example.com/platform/commit/?id=abc"))
}

package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
)

// TestForgeFlagBuildsTheProviderByName: --forge is looked up in the
// registry; an unknown name is refused with the names that are known.
func TestForgeFlagBuildsTheProviderByName(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	NewWithT(t).Expect(os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600)).To(Succeed())
	tests := []struct {
		kind, url string
		want      forge.Forge
		limit     int
		err       string
	}{
		{kind: "github", want: &github.Client{}, limit: github.CommentLimit},
		{kind: "gitlab", url: "https://gitlab.example.com", want: &gitlab.Client{}, limit: gitlab.CommentLimit},
		{kind: "gitea", err: "failed to configure --forge gitea: invalid forge request: a gitea client needs the server's URL"},
		{kind: "bitbucket", err: `--forge: unknown forge "bitbucket" (known: gitea, github, gitlab)`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			g := NewWithT(t)
			f := &forgeFlags{kind: tt.kind, baseURL: tt.url, tokenFile: tokenFile}
			c, limit, err := f.client()
			if tt.err != "" {
				g.Expect(err).To(MatchError(tt.err))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(BeAssignableToTypeOf(tt.want))
			g.Expect(limit).To(Equal(tt.limit))
		})
	}
}

func TestForgeFlagsHelpNamesTheRegisteredForges(t *testing.T) {
	g := NewWithT(t)
	cmd := newRootCommand()
	sync, _, err := cmd.Find([]string{"sync"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sync.Flag("forge").Usage).To(HaveSuffix("this forge: gitea, github, gitlab"))
	g.Expect(sync.Flag("listen").Usage).To(ContainSubstring("POST /hooks/gitea, /hooks/github, /hooks/gitlab"))
}

package providers_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
	"cairn.dev/cairn/gitsource/forge/providers"
)

// TestDefaultBuildsEachClient: each shipped provider builds its own client
// by name, with its own comment limit and its own required options.
func TestDefaultBuildsEachClient(t *testing.T) {
	tests := []struct {
		name  string
		opts  forge.ClientOptions
		want  forge.Forge
		limit int
		err   string
	}{
		{"gitea", forge.ClientOptions{BaseURL: "https://gitea.example.com", Token: "t"}, &gitea.Client{}, 65536, ""},
		{"gitea", forge.ClientOptions{Token: "t"}, nil, 0, "a gitea client needs the server's URL"},
		{"github", forge.ClientOptions{Token: "t"}, &github.Client{}, 65536, ""},
		{"github", forge.ClientOptions{}, nil, 0, "github client needs a token"},
		{"gitlab", forge.ClientOptions{Token: "t"}, &gitlab.Client{}, 1000000, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.err, func(t *testing.T) {
			g := NewWithT(t)
			p, err := providers.Default().Lookup(tt.name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Name()).To(Equal(tt.name))
			c, err := p.NewForge(tt.opts)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				g.Expect(err).To(MatchError(forge.ErrInvalid))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(BeAssignableToTypeOf(tt.want))
			g.Expect(p.CommentLimit()).To(Equal(tt.limit))
		})
	}
}

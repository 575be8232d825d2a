package forge_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/providers"
)

// namedForge is fakeForge under another name.
type namedForge struct {
	fakeForge
	name string
}

func (p namedForge) Name() string { return p.name }

func TestNewRegistryRefusesBadNames(t *testing.T) {
	tests := []struct {
		name      string
		providers []forge.Provider
		err       string
	}{
		{"twice", []forge.Provider{github.Provider{}, github.Provider{}}, `forge provider "github" registered twice`},
		{"empty name", []forge.Provider{namedForge{name: ""}}, `forge provider name "" is not a lowercase path segment`},
		{"a slash", []forge.Provider{namedForge{name: "git/hub"}}, "not a lowercase path segment"},
		{"upper case", []forge.Provider{namedForge{name: "GitHub"}}, "not a lowercase path segment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := forge.NewRegistry(tt.providers...)
			g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
			g.Expect(err).To(MatchError(forge.ErrInvalid))
		})
	}
}

func TestRegistryLookup(t *testing.T) {
	g := NewWithT(t)
	reg := providers.Default()
	g.Expect(reg.Names()).To(Equal([]string{"gitea", "github", "gitlab"}))
	p, err := reg.Lookup("gitea")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(gitea.Provider{}))
	_, err = reg.Lookup("bitbucket")
	g.Expect(err).To(MatchError(`unknown forge "bitbucket" (known: gitea, github, gitlab)`))
}

func TestRegistryHooksServeEveryProvider(t *testing.T) {
	g := NewWithT(t)
	hooks := providers.Default().Hooks("k")
	g.Expect(hooks).To(HaveLen(3))
	for _, h := range hooks {
		g.Expect(h.Secret).To(Equal("k"))
	}
	g.Expect(hooks[1].Provider).To(Equal(github.Provider{}))
}

func TestNewReceiverRefusesARepeatedHook(t *testing.T) {
	g := NewWithT(t)
	opts := forge.ReceiverOptions{Hooks: []forge.Hook{{Provider: github.Provider{}, Secret: "a"}, {Provider: github.Provider{}, Secret: "b"}}}
	_, err := forge.NewReceiver(opts, func(forge.Event) {})
	g.Expect(err).To(MatchError(ContainSubstring(`webhook hook "github" given twice`)))
}

package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/providers"
)

// forgeFlags configure commit statuses, pull-request plans and webhooks.
type forgeFlags struct {
	kind, baseURL, repo, tokenFile, targetURL string
	listen, webhookSecretFile                 string
	// registry holds the forges --forge names and --listen serves; nil for
	// providers.Default().
	registry *forge.Registry
}

// providers is the registry of forges: --forge is looked up in it, and
// --listen serves a hook for each of its providers.
func (f *forgeFlags) providers() *forge.Registry {
	if f.registry == nil {
		f.registry = providers.Default()
	}
	return f.registry
}

func (f *forgeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	names := f.providers().Names()
	f.registerClient(cmd, "post commit statuses and pull-request plans to this forge")
	fl.StringVar(&f.targetURL, "status-url", "", "URL linked from every commit status")
	fl.StringVar(&f.listen, "listen", "", "serve webhooks on this address (POST /hooks/"+strings.Join(names, ", /hooks/")+")")
	fl.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the webhook secret (required with --listen)")
}

// registerClient registers the flags that reach the forge's API; what says what
// the forge is for.
func (f *forgeFlags) registerClient(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "forge", "", what+": "+strings.Join(f.providers().Names(), ", "))
	fl.StringVar(&f.baseURL, "forge-url", "", "the forge's URL (default: github.com / gitlab.com; required for gitea)")
	fl.StringVar(&f.repo, "forge-repo", "", "owner/name of the repository on the forge (default: from --repo)")
	fl.StringVar(&f.tokenFile, "forge-token-file", "", "file holding the forge access token (e.g. a mounted Secret)")
}

// client builds the forge client and the comment size limit; nil when no forge is set.
func (f *forgeFlags) client() (forge.Forge, int, error) {
	if f.kind == "" {
		return nil, 0, nil
	}
	p, err := f.providers().Lookup(f.kind)
	if err != nil {
		return nil, 0, fmt.Errorf("--forge: %w", err)
	}
	token, err := readSecretFile(f.tokenFile, "--forge-token-file")
	if err != nil {
		return nil, 0, err
	}
	c, err := p.NewForge(forge.ClientOptions{BaseURL: f.baseURL, Token: token})
	if err != nil {
		return nil, 0, fmt.Errorf("failed to configure --forge %s: %w", f.kind, err)
	}
	return c, p.CommentLimit(), nil
}

// repoRef is --forge-repo, or the owner/name path of the Git URL.
func (f *forgeFlags) repoRef(gitURL string) (forge.RepoRef, error) {
	full := f.repo
	if full == "" {
		u, err := url.Parse(gitURL)
		if err != nil {
			return forge.RepoRef{}, fmt.Errorf("give --forge-repo: %w", err)
		}
		full = strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	}
	return forge.ParseRepoRef(full)
}

func readSecretFile(path, flag string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%s is required", flag)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("failed to read %s: %w", flag, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", flag)
	}
	return s, nil
}

package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/gitlab"
)

// forgeFlags configure commit statuses, pull-request plans and webhooks.
type forgeFlags struct {
	kind, baseURL, repo, tokenFile, targetURL string
	listen, webhookSecretFile                 string
}

func (f *forgeFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "forge", "", "post commit statuses and pull-request plans to this forge: gitea, github or gitlab")
	fl.StringVar(&f.baseURL, "forge-url", "", "the forge's URL (default: github.com / gitlab.com; required for gitea)")
	fl.StringVar(&f.repo, "forge-repo", "", "owner/name of the repository on the forge (default: from --repo)")
	fl.StringVar(&f.tokenFile, "forge-token-file", "", "file holding the forge access token (e.g. a mounted Secret)")
	fl.StringVar(&f.targetURL, "status-url", "", "URL linked from every commit status")
	fl.StringVar(&f.listen, "listen", "", "serve webhooks on this address (POST /hooks/gitea, /hooks/github, /hooks/gitlab)")
	fl.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the webhook secret (required with --listen)")
}

// client builds the forge client and the comment size limit; nil when no forge is set.
func (f *forgeFlags) client() (forge.Forge, int, error) {
	if f.kind == "" {
		return nil, 0, nil
	}
	token, err := readSecretFile(f.tokenFile, "--forge-token-file")
	if err != nil {
		return nil, 0, err
	}
	switch f.kind {
	case "gitea":
		if f.baseURL == "" {
			return nil, 0, fmt.Errorf("--forge-url is required with --forge gitea")
		}
		c, err := gitea.New(gitea.Options{BaseURL: f.baseURL, Token: token})
		return c, gitea.CommentLimit, err
	case "github":
		c, err := github.New(github.Options{BaseURL: f.baseURL, Token: token})
		return c, github.CommentLimit, err
	case "gitlab":
		c, err := gitlab.New(gitlab.Options{BaseURL: f.baseURL, Token: token})
		return c, gitlab.CommentLimit, err
	}
	return nil, 0, fmt.Errorf("--forge must be gitea, github or gitlab, not %q", f.kind)
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

package github_test

import (
	"testing"

	"cairn.dev/cairn/gitsource/forge/github"
	"cairn.dev/cairn/gitsource/forge/internal/hooktest"
)

func FuzzGitHubPayload(f *testing.F) {
	hooktest.Fuzz(f, github.Provider{}.Parse, map[string][]string{
		"push":         {"github_push.json", "github_push_commit.json"},
		"pull_request": {"github_pull_request_opened.json"},
		"ping":         {"github_ping.json"},
	})
}

package gitlab_test

import (
	"testing"

	"cairn.dev/cairn/gitsource/forge/gitlab"
	"cairn.dev/cairn/gitsource/forge/internal/hooktest"
)

func FuzzGitLabPayload(f *testing.F) {
	hooktest.Fuzz(f, gitlab.Provider{}.Parse, map[string][]string{
		"Push Hook":          {"gitlab_push.json"},
		"Merge Request Hook": {"gitlab_merge_request.json", "gitlab_merge_request_update.json"},
		"System Hook":        {"gitlab_push.json"},
	})
}

package gitea_test

import (
	"testing"

	"cairn.dev/cairn/gitsource/forge/gitea"
	"cairn.dev/cairn/gitsource/forge/internal/hooktest"
)

func FuzzGiteaPayload(f *testing.F) {
	hooktest.Fuzz(f, gitea.Provider{}.Parse, map[string][]string{
		"push":         {"gitea_push.json"},
		"pull_request": {"gitea_pull_request_opened.json", "gitea_pull_request_synchronized.json"},
	})
}

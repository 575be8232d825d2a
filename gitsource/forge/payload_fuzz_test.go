package forge

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzParser checks that a payload parser never panics, and that what it
// accepts is a well-formed event.
func fuzzParser(f *testing.F, parse func(string, []byte) (Event, error), seeds map[string][]string) {
	for event, files := range seeds {
		for _, file := range files {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(event, data)
		}
		f.Add(event, []byte(`{"ref":null,"repository":{"full_name":""},"pull_request":{"head":null}}`))
		f.Add(event, []byte(`{"object_kind":"merge_request","object_attributes":{"iid":-1,"action":"update","oldrev":"x"},"project":{}}`))
		f.Add(event, []byte(`[]`))
		f.Add(event, []byte(``))
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		ev, err := parse(event, body)
		var ignored *ignoredError
		switch {
		case errors.As(err, &ignored), err != nil:
			if ev != nil {
				t.Fatalf("an event with an error: %#v, %v", ev, err)
			}
		case ev == nil:
			t.Fatalf("no event and no error")
		default:
			checkEvent(t, ev)
		}
	})
}

func checkEvent(t *testing.T, ev Event) {
	if err := ev.Repository().Validate(); err != nil {
		t.Fatalf("accepted an invalid repository: %v", err)
	}
	switch e := ev.(type) {
	case Push:
		if e.Branch == "" {
			t.Fatalf("push without a branch")
		}
		if e.SHAHint != "" && ValidateSHA(e.SHAHint) != nil {
			t.Fatalf("push with a malformed SHA hint %q", e.SHAHint)
		}
	case PullRequest:
		if e.Number <= 0 || e.Action == "" {
			t.Fatalf("pull request without a number or action: %#v", e)
		}
	default:
		t.Fatalf("unknown event type %T", ev)
	}
}

func FuzzGiteaPayload(f *testing.F) {
	fuzzParser(f, parseGitea, map[string][]string{
		"push":         {"gitea_push.json"},
		"pull_request": {"gitea_pull_request_opened.json", "gitea_pull_request_synchronized.json"},
	})
}

func FuzzGitHubPayload(f *testing.F) {
	fuzzParser(f, parseGitHub, map[string][]string{
		"push":         {"github_push.json", "github_push_commit.json"},
		"pull_request": {"github_pull_request_opened.json"},
		"ping":         {"github_ping.json"},
	})
}

func FuzzGitLabPayload(f *testing.F) {
	fuzzParser(f, parseGitLab, map[string][]string{
		"Push Hook":          {"gitlab_push.json"},
		"Merge Request Hook": {"gitlab_merge_request.json", "gitlab_merge_request_update.json"},
		"System Hook":        {"gitlab_push.json"},
	})
}

// Package hooktest holds the fuzz harness every forge's webhook parser runs
// under: whatever the payload, Parse never panics, and what it accepts is a
// well-formed event.
package hooktest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"cairn.dev/cairn/gitsource/forge"
)

// Fuzz fuzzes parse with event types and payloads, seeded with the recorded
// deliveries seeds names (event type to files under testdata) and a few
// hostile shapes.
func Fuzz(f *testing.F, parse func(string, []byte) (forge.Event, error), seeds map[string][]string) {
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
		var ignored *forge.IgnoredError
		switch {
		case errors.As(err, &ignored), err != nil:
			if ev != nil {
				t.Fatalf("an event with an error: %#v, %v", ev, err)
			}
		case ev == nil:
			t.Fatalf("no event and no error")
		default:
			CheckEvent(t, ev)
		}
	})
}

// CheckEvent fails t unless ev is a Push or PullRequest with a valid
// repository, a branch (a push) or a number and action (a pull request), and
// a well-formed SHA hint.
func CheckEvent(t testing.TB, ev forge.Event) {
	t.Helper()
	if err := ev.Repository().Validate(); err != nil {
		t.Fatalf("accepted an invalid repository: %v", err)
	}
	switch e := ev.(type) {
	case forge.Push:
		if e.Branch == "" {
			t.Fatalf("push without a branch")
		}
		if e.SHAHint != "" && forge.ValidateSHA(e.SHAHint) != nil {
			t.Fatalf("push with a malformed SHA hint %q", e.SHAHint)
		}
	case forge.PullRequest:
		if e.Number <= 0 || e.Action == "" {
			t.Fatalf("pull request without a number or action: %#v", e)
		}
	default:
		t.Fatalf("unknown event type %T", ev)
	}
}

package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// IgnoredError marks a well-formed delivery cairn does not act on (another
// event, a tag push, a closed pull request): the Receiver acknowledges it
// with 202 and emits nothing.
type IgnoredError struct {
	// Why says what was ignored ("event \"star\"").
	Why string
}

func (e *IgnoredError) Error() string { return "ignored: " + e.Why }

// Ignore returns the IgnoredError for a value of what cairn does not act on,
// for example Ignore("event", "star"); the value is quoted and cut to 40
// bytes.
func Ignore(what, value string) error {
	return &IgnoredError{Why: fmt.Sprintf("%s %q", what, cut(value, 40))}
}

// DecodePayload unmarshals a webhook payload into v; a JSON null or a
// non-object is an error.
func DecodePayload(body []byte, v any) error {
	trimmed := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	if !strings.HasPrefix(trimmed, "{") {
		return errors.New("payload is not a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("payload is not valid JSON: %s", cut(err.Error(), 200))
	}
	return nil
}

// NewPush builds the Push a parser of source returns for a push of ref to
// the repository fullName ("owner/name") whose new head is sha. Pushes of
// tags and other refs are ignored; a malformed repository name is an error.
func NewPush(source, ref, fullName, sha string) (Event, error) {
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || branch == "" {
		if ref == "" {
			return nil, errors.New("push without a ref")
		}
		return nil, &IgnoredError{Why: fmt.Sprintf("push to %s, not a branch", cut(ref, 100))}
	}
	repo, err := payloadRepo(fullName)
	if err != nil {
		return nil, err
	}
	return Push{Source: source, Repo: repo, Branch: branch, SHAHint: shaHint(sha)}, nil
}

// NewPullRequest builds the PullRequest a parser of source returns once it
// has normalised the action to a PRAction constant.
func NewPullRequest(source, fullName string, number int64, action, sha string) (Event, error) {
	repo, err := payloadRepo(fullName)
	if err != nil {
		return nil, err
	}
	if number <= 0 || number > 1<<31 {
		return nil, fmt.Errorf("pull request number %d out of range", number)
	}
	return PullRequest{Source: source, Repo: repo, Number: int(number), Action: action, HeadSHAHint: shaHint(sha)}, nil
}

func payloadRepo(fullName string) (RepoRef, error) {
	if fullName == "" {
		return RepoRef{}, errors.New("payload without a repository name")
	}
	repo, err := ParseRepoRef(fullName)
	if err != nil {
		return RepoRef{}, fmt.Errorf("payload repository: %w", err)
	}
	return repo, nil
}

// shaHint keeps a payload SHA only when it looks like one and is not the
// all-zero id of a deleted branch.
func shaHint(sha string) string {
	if ValidateSHA(sha) != nil || strings.Trim(sha, "0") == "" {
		return ""
	}
	return strings.ToLower(sha)
}

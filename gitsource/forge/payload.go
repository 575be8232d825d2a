package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ignoredError marks a well-formed delivery cairn does not act on.
type ignoredError struct{ why string }

func (e *ignoredError) Error() string { return "ignored: " + e.why }

func ignore(format string, args ...any) error {
	return &ignoredError{why: fmt.Sprintf(format, args...)}
}

// decode unmarshals a payload into v; a JSON null or a non-object is an error.
func decode(body []byte, v any) error {
	trimmed := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	if !strings.HasPrefix(trimmed, "{") {
		return errors.New("payload is not a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("payload is not valid JSON: %s", cut(err.Error(), 200))
	}
	return nil
}

// pushEvent builds a Push from a ref and a repository full name; pushes of
// tags and other refs are ignored.
func pushEvent(source, ref, fullName, sha string) (Event, error) {
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || branch == "" {
		if ref == "" {
			return nil, errors.New("push without a ref")
		}
		return nil, ignore("push to %s, not a branch", cut(ref, 100))
	}
	repo, err := payloadRepo(fullName)
	if err != nil {
		return nil, err
	}
	return Push{Source: source, Repo: repo, Branch: branch, SHAHint: shaHint(sha)}, nil
}

// prEvent builds a PullRequest once the action was normalised.
func prEvent(source, fullName string, number int64, action, sha string) (Event, error) {
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

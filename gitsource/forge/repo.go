package forge

import (
	"fmt"
	"strings"
	"unicode"
)

// RepoRef names a repository on a forge. Owner is the user or organisation
// (on GitLab, the full group path, which may hold slashes: "group/sub"); Name
// is the repository (GitLab: project) name.
type RepoRef struct {
	Owner string
	Name  string
}

// String returns "owner/name".
func (r RepoRef) String() string { return r.Owner + "/" + r.Name }

// ParseRepoRef splits a full name "owner/name" (or "group/sub/name") at its
// last slash.
func ParseRepoRef(full string) (RepoRef, error) {
	i := strings.LastIndex(full, "/")
	if i < 0 {
		return RepoRef{}, fmt.Errorf("%w: repository %q is not owner/name", ErrInvalid, full)
	}
	r := RepoRef{Owner: full[:i], Name: full[i+1:]}
	return r, r.Validate()
}

// Validate rejects names that could not be a repository: empty parts, "." or
// ".." path segments, a slash in Name, and control or space characters.
func (r RepoRef) Validate() error {
	if r.Owner == "" || r.Name == "" || strings.Contains(r.Name, "/") {
		return fmt.Errorf("%w: repository %q is not owner/name", ErrInvalid, r.String())
	}
	for _, seg := range strings.Split(r.String(), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: repository %q has an empty or dot segment", ErrInvalid, r.String())
		}
	}
	if strings.IndexFunc(r.String(), func(c rune) bool { return unicode.IsControl(c) || unicode.IsSpace(c) }) >= 0 {
		return fmt.Errorf("%w: repository %q holds a space or control character", ErrInvalid, r.String())
	}
	return nil
}

// ValidateSHA accepts a full SHA-1 or SHA-256 commit id in hexadecimal.
func ValidateSHA(sha string) error {
	if len(sha) != 40 && len(sha) != 64 {
		return fmt.Errorf("%w: commit %q is not a full SHA", ErrInvalid, cut(sha, 80))
	}
	for _, c := range sha {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return fmt.Errorf("%w: commit %q is not hexadecimal", ErrInvalid, cut(sha, 80))
		}
	}
	return nil
}

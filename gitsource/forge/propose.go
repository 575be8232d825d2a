package forge

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Proposer opens a pull (GitLab: merge) request that changes files, through the
// forge's API only: cairn's Git credential may be read-only, and the forge token
// already writes statuses and comments. Every forge cairn ships implements it.
type Proposer interface {
	// ProposeChange commits ch.Files on a new branch ch.Branch whose parent is
	// ch.BaseSHA, the tip of ch.Base the change was computed against, and opens
	// a pull request from it into ch.Base.
	ProposeChange(ctx context.Context, repo RepoRef, ch Change) (Proposal, error)
}

// Change is a commit of file contents proposed as a pull request.
type Change struct {
	// Base is the branch the pull request targets; BaseSHA its tip the files
	// were computed against (the forge refuses the change when a file moved on).
	Base, BaseSHA string
	// Branch is the new branch, which must not exist.
	Branch string
	// Message is the commit message; Title and Body the pull request's.
	Message, Title, Body string
	Files                []FileChange
}

// FileChange is the new content of one file of the repository.
type FileChange struct {
	Path    string
	Content []byte
	// Delete removes the file (Content is ignored).
	Delete bool
	// Existed tells whether the file exists at BaseSHA; Before is its content
	// there (Gitea names the blob it replaces).
	Existed bool
	Before  []byte
}

// Proposal is the pull request opened.
type Proposal struct {
	Number int
	URL    string
}

var branchName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// Validate checks a change to repo before it is sent to any forge.
func (ch Change) Validate(repo RepoRef) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	switch {
	case !branchName.MatchString(ch.Branch) || strings.Contains(ch.Branch, "..") || strings.HasSuffix(ch.Branch, ".lock"):
		return fmt.Errorf("%w: branch name %q", ErrInvalid, ch.Branch)
	case !branchName.MatchString(ch.Base):
		return fmt.Errorf("%w: base branch %q", ErrInvalid, ch.Base)
	case len(ch.Files) == 0:
		return fmt.Errorf("%w: a change of no file", ErrInvalid)
	case strings.TrimSpace(ch.Title) == "" || strings.TrimSpace(ch.Message) == "":
		return fmt.Errorf("%w: a change needs a title and a commit message", ErrInvalid)
	}
	if err := ValidateSHA(ch.BaseSHA); err != nil {
		return err
	}
	for _, f := range ch.Files {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || strings.Contains("/"+f.Path+"/", "/../") {
			return fmt.Errorf("%w: file path %q", ErrInvalid, f.Path)
		}
	}
	return nil
}

// BlobID is the Git object ID of a blob holding content (SHA-1), as a forge
// names the file it replaces.
func BlobID(content []byte) string {
	return plumbing.ComputeHash(plumbing.BlobObject, content).String()
}

// Op is what the change does to the file: "delete", "update" or "create" (the
// verbs Gitea's and GitLab's APIs share).
func (f FileChange) Op() string {
	switch {
	case f.Delete:
		return "delete"
	case f.Existed:
		return "update"
	}
	return "create"
}

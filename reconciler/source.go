package reconciler

import (
	"context"
	"time"

	"cairn.dev/cairn/gitsource"
)

// GitSource is what the engine needs of a Git repository; gitsource.Source is it.
type GitSource interface {
	Fetch(ctx context.Context, sha string) error
	Tree(ctx context.Context, sha, subdir string) (*gitsource.Tree, error)
	Diff(ctx context.Context, from, to string) ([]string, error)
	Commit(ctx context.Context, sha string) (gitsource.CommitInfo, error)
	HasCommit(sha string) bool
}

// ReadRevision fetches sha and returns it as a revision, with the paths changed since
// base when base is in the fetched history. On error the revision carries only sha. Otherwise (new cluster, force-push,
// another repository) Changed is nil and every instance is a candidate.
func ReadRevision(ctx context.Context, src GitSource, sha, base string) (Revision, error) {
	began := time.Now()
	rev, err := readRevision(ctx, src, sha, base)
	rev.Fetch = time.Since(began)
	return rev, err
}

func readRevision(ctx context.Context, src GitSource, sha, base string) (Revision, error) {
	if err := src.Fetch(ctx, sha); err != nil {
		return Revision{SHA: sha}, err
	}
	tree, err := src.Tree(ctx, sha, "")
	if err != nil {
		return Revision{SHA: sha}, err
	}
	commit, err := src.Commit(ctx, sha)
	if err != nil {
		return Revision{SHA: sha}, err
	}
	rev := Revision{SHA: sha, Tree: tree, Message: commit.Message, Committed: commit.Committed}
	switch {
	case base == sha:
		rev.Changed, rev.Base = []string{}, base
	case base != "" && src.HasCommit(base):
		if changed, err := src.Diff(ctx, base, sha); err == nil {
			rev.Changed, rev.Base = changed, base
			if rev.Changed == nil {
				rev.Changed = []string{}
			}
		}
	}
	return rev, nil
}

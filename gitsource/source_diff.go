package gitsource

import (
	"context"
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Diff returns the sorted paths that differ between the trees of two commits
// of the cache clone: added, modified and deleted files, and both names of a
// rename. It compares trees, so it is exact whatever the ancestry of the two
// commits. A from (or to) that is not in the cache clone — a new cache, or a
// commit force-pushed away before this cache saw it — is ErrUnknownRevision:
// the caller then treats everything as changed.
func (s *Source) Diff(ctx context.Context, from, to string) ([]string, error) {
	var paths []string
	err := s.withCommit(to, func(sto *filesystem.Storage, toCommit *object.Commit) error {
		fromCommit, err := commitIn(sto, from)
		if err != nil {
			return err
		}
		paths, err = diffPaths(ctx, fromCommit, toCommit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to diff %s..%s of %s: %w", shortText(from), shortText(to), s.remote.safeURL, err)
	}
	return paths, nil
}

// diffPaths compares two commits' trees without rename detection, so a
// rename shows as a deletion and an addition: both names.
func diffPaths(ctx context.Context, from, to *object.Commit) ([]string, error) {
	a, err := from.Tree()
	if err != nil {
		return nil, err
	}
	b, err := to.Tree()
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTreeWithOptions(ctx, a, b, nil)
	if err != nil {
		return nil, err
	}
	set := map[string]struct{}{}
	for _, c := range changes {
		for _, name := range []string{c.From.Name, c.To.Name} {
			if name != "" {
				set[name] = struct{}{}
			}
		}
	}
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, nil
}

package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Fetch makes the commit sha available in the cache clone. A commit already
// there costs nothing (no network). Otherwise the branch is fetched
// incrementally (full single-branch history, see the package documentation)
// and sha must then be the branch tip or one of its ancestors, else the error
// wraps ErrUnknownRevision.
func (s *Source) Fetch(ctx context.Context, sha string) error {
	h, err := parseSHA(sha)
	if err != nil {
		return fmt.Errorf("failed to fetch commit %q of %s: %w", shortText(sha), s.remote.safeURL, err)
	}
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	sto, err := s.cache.storage()
	if err != nil {
		return fmt.Errorf("failed to fetch %s: %w", s.remote.safeURL, err)
	}
	if hasCommit(sto, h) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	sto, tip, err := s.fetchBranch(ctx, sto)
	if err != nil {
		return s.networkError(ctx, "fetch branch "+quote(s.opts.Branch)+" of", err)
	}
	return s.checkReachable(sto, tip, h)
}

// fetchBranch brings the remote branch tip and its history into sto and
// points the cache's branch ref at it.
// It may replace sto by a fresh clone (see maxPacks) and returns the storage
// it used.
func (s *Source) fetchBranch(ctx context.Context, sto *filesystem.Storage) (*filesystem.Storage, plumbing.Hash, error) {
	sess, done, err := s.openSession(ctx)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	defer done()
	ar, tip, err := s.remoteHead(ctx, sess)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	if !hasCommit(sto, tip) && tooManyPacks(sto) {
		if sto, err = s.cache.reset(); err != nil {
			return nil, plumbing.ZeroHash, err
		}
	}
	if !hasCommit(sto, tip) {
		if err := s.fetchPack(ctx, sess, ar, sto, tip); err != nil {
			return nil, plumbing.ZeroHash, err
		}
	}
	ref := plumbing.NewHashReference(branchRef(s.opts.Branch), tip)
	return sto, tip, sto.SetReference(ref)
}

// fetchPack asks for tip, offering every ref of the cache as a have, and
// stores the pack, at most Limits.MaxTotalBytes of it.
func (s *Source) fetchPack(ctx context.Context, sess transport.UploadPackSession, ar *packp.AdvRefs, sto *filesystem.Storage, tip plumbing.Hash) error {
	var err error
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	if ar.Capabilities.Supports(capability.NoProgress) {
		_ = req.Capabilities.Set(capability.NoProgress)
	}
	req.Wants = []plumbing.Hash{tip}
	if req.Haves, err = localTips(sto); err != nil {
		return err
	}
	res, err := sess.UploadPack(ctx, req)
	if errors.Is(err, transport.ErrEmptyUploadPackRequest) {
		return nil
	}
	if err != nil {
		return err
	}
	defer res.Close()
	pack := &cappedReader{r: demux(req.Capabilities, res), left: s.opts.Limits.MaxTotalBytes}
	return packfile.UpdateObjectStorage(sto, pack)
}

// localTips returns the commits the cache's refs point at.
func localTips(sto *filesystem.Storage) ([]plumbing.Hash, error) {
	refs, err := sto.IterReferences()
	if err != nil {
		return nil, err
	}
	var haves []plumbing.Hash
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && hasCommit(sto, ref.Hash()) {
			haves = append(haves, ref.Hash())
		}
		return nil
	})
	return haves, err
}

func demux(caps *capability.List, r io.Reader) io.Reader {
	switch {
	case caps.Supports(capability.Sideband64k):
		return sideband.NewDemuxer(sideband.Sideband64k, r)
	case caps.Supports(capability.Sideband):
		return sideband.NewDemuxer(sideband.Sideband, r)
	}
	return r
}

// checkReachable verifies that want is tip or one of its ancestors.
func (s *Source) checkReachable(sto *filesystem.Storage, tip, want plumbing.Hash) error {
	if tip == want {
		return nil
	}
	if hasCommit(sto, want) && isAncestor(sto, tip, want) {
		return nil
	}
	return fmt.Errorf("failed to fetch commit %s of %s: %w: not on branch %q",
		want, s.remote.safeURL, ErrUnknownRevision, s.opts.Branch)
}

func isAncestor(sto storer.EncodedObjectStorer, tip, want plumbing.Hash) bool {
	c, err := object.GetCommit(sto, tip)
	if err != nil {
		return false
	}
	iter := object.NewCommitPreorderIter(c, nil, nil)
	defer iter.Close()
	found := errors.New("found")
	err = iter.ForEach(func(c *object.Commit) error {
		if c.Hash == want {
			return found
		}
		return nil
	})
	return errors.Is(err, found)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

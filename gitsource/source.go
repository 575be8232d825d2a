package gitsource

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Source is one branch of one remote repository with its cache clone. It is
// safe for concurrent use.
type Source struct {
	opts      Options
	remote    *remote
	creds     credentials
	transport transport.Transport
	cache     *cacheClone
}

// CommitInfo describes a commit.
type CommitInfo struct {
	SHA     string
	Message string
	Author  string // "Name <email>"
	Time    time.Time
	// Committed is the committer's time: when the commit was made as it is (a rebase
	// or cherry-pick renews it; Time, the author's, stays).
	Committed time.Time
}

// New validates opts (URL, branch name, credentials) without any network
// access.
func New(opts Options) (*Source, error) {
	opts = opts.withDefaults()
	r, err := parseRemote(opts.URL, opts.AllowHTTP)
	if err != nil {
		return nil, err
	}
	if err := branchRef(opts.Branch).Validate(); err != nil {
		return nil, fmt.Errorf("failed to use branch %q of %s: %w", opts.Branch, r.safeURL, ErrRefNotFound)
	}
	creds, err := newCredentials(opts.Auth, r)
	if err != nil {
		return nil, err
	}
	return &Source{
		opts:      opts,
		remote:    r,
		creds:     creds,
		transport: newTransport(r, creds.method != nil, sessionByteLimit(opts.Limits)),
		cache:     cacheFor(opts.CacheDir, r.safeURL),
	}, nil
}

// sessionByteLimit is what one network session may receive: one fetch's pack
// plus room for the ref advertisement.
func sessionByteLimit(l Limits) int64 { return l.MaxTotalBytes + 8<<20 }

func branchRef(branch string) plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName(branch)
}

// Head resolves the branch on the remote with a single ls-remote; it fetches
// nothing. A missing branch (or an empty repository) is ErrRefNotFound.
func (s *Source) Head(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	sess, done, err := s.openSession(ctx)
	if err != nil {
		return "", s.networkError(ctx, "list refs of", err)
	}
	defer done()
	_, h, err := s.remoteHead(ctx, sess)
	if err != nil {
		return "", s.networkError(ctx, "list refs of", err)
	}
	return h.String(), nil
}

// openSession starts an upload-pack session bound to ctx.
func (s *Source) openSession(ctx context.Context) (transport.UploadPackSession, func(), error) {
	ep, release := sessionEndpoint(ctx, s.remote, sessionByteLimit(s.opts.Limits))
	sess, err := s.transport.NewUploadPackSession(ep, s.creds.method)
	if err != nil {
		release()
		return nil, nil, err
	}
	return sess, func() { _ = sess.Close(); release() }, nil
}

// remoteHead reads the ref advertisement (one round trip) and returns it
// with the branch tip.
func (s *Source) remoteHead(ctx context.Context, sess transport.UploadPackSession) (*packp.AdvRefs, plumbing.Hash, error) {
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil, plumbing.ZeroHash, s.refNotFound()
	}
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	h, ok := ar.References[branchRef(s.opts.Branch).String()]
	if !ok || h.IsZero() {
		return nil, plumbing.ZeroHash, s.refNotFound()
	}
	return ar, h, nil
}

func (s *Source) refNotFound() error {
	return fmt.Errorf("%w: branch %q", ErrRefNotFound, s.opts.Branch)
}

// networkError wraps the failure of a network step, typed and scrubbed.
func (s *Source) networkError(ctx context.Context, verb string, err error) error {
	return fmt.Errorf("failed to %s %s: %w", verb, s.remote.safeURL, scrub(classify(ctx, err), s.creds.secrets))
}

// HasCommit reports whether the commit sha is in the cache clone.
func (s *Source) HasCommit(sha string) bool {
	h, err := parseSHA(sha)
	if err != nil {
		return false
	}
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	sto, err := s.cache.storage()
	return err == nil && hasCommit(sto, h)
}

// Commit returns the metadata of a commit in the cache clone.
func (s *Source) Commit(ctx context.Context, sha string) (CommitInfo, error) {
	var info CommitInfo
	err := s.withCommit(sha, func(_ *filesystem.Storage, c *object.Commit) error {
		info = CommitInfo{
			SHA:       c.Hash.String(),
			Message:   c.Message,
			Author:    fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
			Time:      c.Author.When,
			Committed: c.Committer.When,
		}
		return nil
	})
	if err != nil {
		return CommitInfo{}, fmt.Errorf("failed to read commit of %s: %w", s.remote.safeURL, err)
	}
	return info, nil
}

// withCommit runs fn on a commit of the cache clone under the cache lock.
func (s *Source) withCommit(sha string, fn func(*filesystem.Storage, *object.Commit) error) error {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	sto, err := s.cache.storage()
	if err != nil {
		return err
	}
	c, err := commitIn(sto, sha)
	if err != nil {
		return err
	}
	return fn(sto, c)
}

// commitIn looks a commit up in sto; the error names the commit.
func commitIn(sto *filesystem.Storage, sha string) (*object.Commit, error) {
	h, err := parseSHA(sha)
	if err == nil {
		var c *object.Commit
		if c, err = object.GetCommit(sto, h); err == nil {
			return c, nil
		}
		err = fmt.Errorf("%w: %w", ErrUnknownRevision, err)
	}
	return nil, fmt.Errorf("commit %q: %w", shortText(sha), err)
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

func parseSHA(sha string) (plumbing.Hash, error) {
	if !shaPattern.MatchString(sha) {
		return plumbing.ZeroHash, fmt.Errorf("%w: not a full lowercase hex SHA-1", ErrUnknownRevision)
	}
	return plumbing.NewHash(sha), nil
}

// shortText bounds caller-supplied text quoted in messages.
func shortText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ShortSHA is the first 12 characters of a commit SHA, as messages and tables
// show it; a shorter string (a directory's "dir:" revision, "") is kept whole.
func ShortSHA(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

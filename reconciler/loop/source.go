package loop

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
)

// Source is the platform repository as the loop reads it.
type Source interface {
	// Head is the revision to sync now: the branch head, or "" when the source
	// cannot tell it cheaply (a directory on disk, read at every poll).
	Head(ctx context.Context) (string, error)
	// Read reads the revision head, with the paths changed since base.
	Read(ctx context.Context, head, base string) (reconciler.Revision, error)
}

// Dir is a directory on disk, read as it is: its revision is named by its content
// digest.
type Dir struct{ Path string }

// Head is "": a directory is read at every poll.
func (Dir) Head(context.Context) (string, error) { return "", nil }

// Read reads the directory.
func (d Dir) Read(context.Context, string, string) (reconciler.Revision, error) {
	tree, err := gitsource.ReadDir(d.Path, gitsource.DefaultLimits())
	if err != nil {
		return reconciler.Revision{}, err
	}
	return reconciler.Revision{SHA: "dir:" + strings.TrimPrefix(tree.Digest(), "sha256:")[:12], Tree: tree}, nil
}

// GitRepo is a Git repository followed at a branch, or read at one fixed commit.
type GitRepo struct {
	opts gitsource.Options
	sha  string
	mu   sync.Mutex
	src  *gitsource.Source // opened on first use (under mu: the loop and the rollbacks of replicas read it)
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// NewGitRepo returns the repository opts name, followed at ref: "" follows
// opts.Branch, a 40-hex SHA reads that commit (on opts.Branch's history), and any other
// ref is the branch to follow.
func NewGitRepo(opts gitsource.Options, ref string) *GitRepo {
	g := &GitRepo{opts: opts}
	switch {
	case shaPattern.MatchString(ref):
		g.sha = ref
	case ref != "":
		g.opts.Branch = ref
	}
	return g
}

// Source opens the repository's cache clone (once).
func (g *GitRepo) Source() (*gitsource.Source, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.src == nil {
		src, err := gitsource.New(g.opts)
		if err != nil {
			return nil, err
		}
		g.src = src
	}
	return g.src, nil
}

// Head is the fixed commit, else the branch head (one ls-remote).
func (g *GitRepo) Head(ctx context.Context) (string, error) {
	if g.sha != "" {
		return g.sha, nil
	}
	src, err := g.Source()
	if err != nil {
		return "", err
	}
	return src.Head(ctx)
}

// Read fetches head and reads it, with the paths changed since base.
func (g *GitRepo) Read(ctx context.Context, head, base string) (reconciler.Revision, error) {
	src, err := g.Source()
	if err != nil {
		return reconciler.Revision{SHA: head}, err
	}
	return reconciler.ReadRevision(ctx, src, head, base)
}

// ReadRef reads one branch or commit SHA of the repository.
func (g *GitRepo) ReadRef(ctx context.Context, ref string) (reconciler.Revision, error) {
	other := NewGitRepo(g.opts, ref)
	head, err := other.Head(ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	return other.Read(ctx, head, "")
}

// Fork is the fork fullName ("owner/name") of the repository on the same host, read
// anonymously: it gets no credential of ours, whatever the repository has.
func (g *GitRepo) Fork(fullName string) *GitRepo {
	opts := g.opts
	opts.Auth = nil
	opts.URL = forkURL(opts.URL, fullName)
	return &GitRepo{opts: opts}
}

// forkURL is the Git URL of the fork: the repository URL with its owner/name path
// replaced, and no user information.
func forkURL(repoURL, fullName string) string {
	u, err := url.Parse(repoURL)
	if err != nil || u.Host == "" {
		return repoURL
	}
	u.User = nil
	u.Path = "/" + strings.Trim(fullName, "/") + ".git"
	return u.String()
}

// Recent is a Source that keeps the last revisions it read, so that another reader
// in the same process takes them from memory (see ReadThrough): the controller's
// instance reconciles read the revision the leader's loop has just read instead of
// fetching it again into their own cache clone (a Git repository's clone is not
// shared between readers).
type Recent struct {
	Source
	mu   sync.Mutex
	revs []reconciler.Revision // the newest last
}

// recentKept is how many revisions Recent keeps: a replica keeps the states of
// two (see keptStates).
const recentKept = 2

// Read reads through the Source and keeps what it read.
func (r *Recent) Read(ctx context.Context, head, base string) (reconciler.Revision, error) {
	rev, err := r.Source.Read(ctx, head, base)
	if err == nil && rev.Tree != nil {
		r.mu.Lock()
		r.revs = slices.DeleteFunc(r.revs, func(k reconciler.Revision) bool { return k.SHA == rev.SHA }) // read again: kept once
		r.revs = append(r.revs, rev)
		if len(r.revs) > recentKept {
			r.revs = r.revs[len(r.revs)-recentKept:]
		}
		r.mu.Unlock()
	}
	return rev, err
}

// lookup is the revision sha if read recently, read as from no base: the paths
// changed since the reader's last sync say nothing to another reader.
func (r *Recent) lookup(sha string) (reconciler.Revision, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.revs) - 1; i >= 0; i-- {
		if rev := r.revs[i]; rev.SHA == sha {
			rev.Changed, rev.Base, rev.Fetch, rev.Refreshed = nil, "", 0, nil
			return rev, true
		}
	}
	return reconciler.Revision{}, false
}

// ReadThrough reads a revision from Recent when it read it lately, else from Source.
type ReadThrough struct {
	Recent *Recent
	Source
}

// Read reads head from memory when Recent has it and no base is asked for.
func (t ReadThrough) Read(ctx context.Context, head, base string) (reconciler.Revision, error) {
	if base == "" {
		if rev, ok := t.Recent.lookup(head); ok {
			return rev, nil
		}
	}
	return t.Source.Read(ctx, head, base)
}

package loop

import (
	"context"
	"net/url"
	"regexp"
	"strings"

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
	src  *gitsource.Source // opened on first use
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

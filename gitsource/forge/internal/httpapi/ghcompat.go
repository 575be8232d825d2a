package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"cairn.dev/cairn/gitsource/forge"
)

// ValidateStatus checks a commit status before it is sent to any forge.
func ValidateStatus(repo forge.RepoRef, sha string, st forge.Status) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	if err := forge.ValidateSHA(sha); err != nil {
		return err
	}
	return st.Validate()
}

// RepoPath is repos/{owner}/{repo}/rest..., the layout GitHub and Gitea share.
func RepoPath(repo forge.RepoRef, rest ...string) []string {
	return append([]string{"repos", repo.Owner, repo.Name}, rest...)
}

// Login reads the token's user (GET /user), which GitHub and Gitea answer alike.
func (c *Client) Login(ctx context.Context) (string, error) {
	var user struct {
		Login string `json:"login"`
	}
	_, err := c.Do(ctx, Request{Op: "read the token's user", Method: http.MethodGet, Path: []string{"user"}, Out: &user})
	return user.Login, err
}

type prBranch struct {
	Ref  string `json:"ref"`
	SHA  string `json:"sha"`
	Repo *struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}

func (b prBranch) fullName() string {
	if b.Repo == nil {
		return ""
	}
	return b.Repo.FullName
}

// PullRequest reads GET /repos/{owner}/{repo}/pulls/{n}, whose shape GitHub and
// Gitea share. Head.repo is null when the fork was deleted: the PR is then a fork
// PR with no head repository.
func (c *Client) PullRequest(ctx context.Context, repo forge.RepoRef, pr int) (forge.PR, error) {
	if err := repo.Validate(); err != nil {
		return forge.PR{}, err
	}
	var out struct {
		Number   int      `json:"number"`
		Base     prBranch `json:"base"`
		Head     prBranch `json:"head"`
		State    string   `json:"state"`
		Merged   bool     `json:"merged"`
		MergeSHA *string  `json:"merge_commit_sha"`
	}
	_, err := c.Do(ctx, Request{Op: fmt.Sprintf("read pull request %s#%d", repo, pr), Method: http.MethodGet,
		Path: RepoPath(repo, "pulls", strconv.Itoa(pr)), Out: &out})
	if err != nil {
		return forge.PR{}, err
	}
	base := out.Base.fullName()
	if base == "" {
		base = repo.String()
	}
	head := out.Head.fullName()
	state := forge.PROpen
	switch {
	case out.Merged:
		state = forge.PRMerged
	case out.State == "closed":
		state = forge.PRClosed
	}
	merge := ""
	if out.Merged && out.MergeSHA != nil {
		merge = *out.MergeSHA // before the merge, GitHub fills it with a test merge commit
	}
	return forge.PR{
		Number: out.Number, BaseSHA: out.Base.SHA, HeadSHA: out.Head.SHA, BaseRef: out.Base.Ref, HeadRef: out.Head.Ref,
		HeadRepoFullName: head, Fork: head == "" || !strings.EqualFold(head, base), State: state, MergeSHA: merge,
	}, nil
}

// OpenPullRequest opens a pull request from ch.Branch into ch.Base (POST
// /repos/{owner}/{repo}/pulls), whose shape GitHub and Gitea share.
func (c *Client) OpenPullRequest(ctx context.Context, repo forge.RepoRef, ch forge.Change) (forge.Proposal, error) {
	var out struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	}
	_, err := c.Do(ctx, Request{Op: fmt.Sprintf("open a pull request from %s into %s of %s", ch.Branch, ch.Base, repo),
		Method: http.MethodPost, Path: RepoPath(repo, "pulls"),
		In: map[string]string{"title": ch.Title, "body": ch.Body, "head": ch.Branch, "base": ch.Base}, Out: &out})
	return forge.Proposal{Number: out.Number, URL: out.HTMLURL}, err
}

package github

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/httpapi"
)

// Limits of GitHub's API: a status description is at most 140 characters,
// an issue comment body at most 65536 ("Body is too long (maximum is 65536
// characters)"; cairn counts bytes, never more than characters).
const (
	DescriptionLimit = 140
	CommentLimit     = 65536
)

// DefaultBaseURL is github.com's API.
const DefaultBaseURL = "https://api.github.com"

// APIVersion is the REST API version cairn was written against.
const APIVersion = "2022-11-28"

// Options configure a Client: BaseURL is the API root, DefaultBaseURL when
// empty or "https://HOST/api/v3" for GitHub Enterprise Server; Token a
// personal access token, or a GitHub App installation token with statuses
// and pull requests write permission; Login the account the token posts as,
// whose plan comment is edited, asked of GitHub (GET /user) when empty.
// Installation tokens cannot call GET /user: set Login to the app's bot login
// ("my-app[bot]").
type Options = forge.ClientOptions

// Client is a GitHub forge.Forge.
type Client struct {
	api   *httpapi.Client
	token string
	login *httpapi.Login
}

var _ forge.Forge = (*Client)(nil)

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	if opts.Token == "" {
		return nil, fmt.Errorf("%w: github client needs a token", forge.ErrInvalid)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	api, err := httpapi.New(httpapi.Config{
		BaseURL:    opts.BaseURL,
		HTTPClient: opts.HTTPClient,
		Header: http.Header{
			"Authorization":        {"Bearer " + opts.Token},
			"Accept":               {"application/vnd.github+json"},
			"X-Github-Api-Version": {APIVersion},
			"User-Agent":           {"cairn"},
		},
		Secrets: []string{opts.Token},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the github client: %w", err)
	}
	c := &Client{api: api, token: opts.Token}
	c.login = httpapi.NewLogin(opts.Login, c.api.Login)
	return c, nil
}

// SetStatus implements forge.Forge (POST /repos/{owner}/{repo}/statuses/{sha}).
func (c *Client) SetStatus(ctx context.Context, repo forge.RepoRef, sha string, st forge.Status) error {
	if err := httpapi.ValidateStatus(repo, sha, st); err != nil {
		return err
	}
	in := map[string]string{
		"state":       string(st.State),
		"context":     st.Context,
		"description": forge.Description(st.Description, DescriptionLimit, c.token),
	}
	if st.TargetURL != "" {
		in["target_url"] = st.TargetURL
	}
	_, err := c.api.Do(ctx, httpapi.Request{
		Op:     fmt.Sprintf("set status %s on %s@%s", st.Context, repo, sha),
		Method: http.MethodPost, Path: httpapi.RepoPath(repo, "statuses", sha), In: in,
	})
	return err
}

// UpsertPlanComment implements forge.Forge with the issue comments API.
func (c *Client) UpsertPlanComment(ctx context.Context, repo forge.RepoRef, pr int, body string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	login, err := c.login.Get(ctx)
	if err != nil {
		return err
	}
	return httpapi.Upsert(ctx, c.comments(repo, pr), login, forge.PlanComment(body, CommentLimit))
}

type comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
}

func (c *Client) comments(repo forge.RepoRef, pr int) httpapi.CommentStore {
	where := fmt.Sprintf("%s#%d", repo, pr)
	number := strconv.Itoa(pr)
	return httpapi.CommentStore{
		List: func(ctx context.Context) ([]httpapi.Comment, error) { return c.listComments(ctx, repo, number, where) },
		Create: func(ctx context.Context, body string) error {
			_, err := c.api.Do(ctx, httpapi.Request{Op: "create the plan comment on " + where, Method: http.MethodPost,
				Path: httpapi.RepoPath(repo, "issues", number, "comments"), In: map[string]string{"body": body}})
			return err
		},
		Edit: func(ctx context.Context, id int64, body string) error {
			_, err := c.api.Do(ctx, httpapi.Request{Op: "edit the plan comment on " + where, Method: http.MethodPatch,
				Path: httpapi.RepoPath(repo, "issues", "comments", strconv.FormatInt(id, 10)), In: map[string]string{"body": body}})
			return err
		},
	}
}

// listComments reads the pull request's comments, 100 a page, following the
// Link header for up to httpapi.MaxPages pages.
func (c *Client) listComments(ctx context.Context, repo forge.RepoRef, number, where string) ([]httpapi.Comment, error) {
	var list []httpapi.Comment
	for page := 1; page > 0 && page <= httpapi.MaxPages; {
		var out []comment
		h, err := c.api.Do(ctx, httpapi.Request{Op: "list comments on " + where, Method: http.MethodGet,
			Path:  httpapi.RepoPath(repo, "issues", number, "comments"),
			Query: url.Values{"per_page": {"100"}, "page": {strconv.Itoa(page)}}, Out: &out})
		if err != nil {
			return nil, err
		}
		for _, cm := range out {
			list = append(list, httpapi.Comment{ID: cm.ID, Body: cm.Body, Author: author(cm)})
		}
		if next := httpapi.NextPage(h); next > page {
			page = next
		} else {
			page = 0
		}
	}
	return list, nil
}

func author(cm comment) string {
	if cm.User == nil {
		return ""
	}
	return cm.User.Login
}

// PullRequest implements forge.Forge (GET /repos/{owner}/{repo}/pulls/{n}).
func (c *Client) PullRequest(ctx context.Context, repo forge.RepoRef, pr int) (forge.PR, error) {
	return c.api.PullRequest(ctx, repo, pr)
}

var _ forge.Proposer = (*Client)(nil)

// ProposeChange implements forge.Proposer with the Git data API: a blob per file
// (POST git/blobs), a tree on the tree of ch.BaseSHA (POST git/trees), a commit whose parent is ch.BaseSHA (POST
// git/commits), the branch (POST git/refs), then the pull request (POST pulls).
func (c *Client) ProposeChange(ctx context.Context, repo forge.RepoRef, ch forge.Change) (forge.Proposal, error) {
	if err := ch.Validate(repo); err != nil {
		return forge.Proposal{}, err
	}
	var base struct {
		Tree struct {
			SHA string `json:"sha"`
		} `json:"tree"`
	}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: "read commit " + ch.BaseSHA + " of " + repo.String(), Method: http.MethodGet,
		Path: httpapi.RepoPath(repo, "git", "commits", ch.BaseSHA), Out: &base}); err != nil {
		return forge.Proposal{}, err
	}
	tree := struct {
		BaseTree string           `json:"base_tree"`
		Tree     []map[string]any `json:"tree"`
	}{BaseTree: base.Tree.SHA}
	for _, f := range ch.Files {
		e := map[string]any{"path": f.Path, "mode": "100644", "type": "blob", "sha": nil} // a null sha deletes the path
		if !f.Delete {
			// A blob of the bytes as they are (base64): the tree's "content" is a
			// JSON string, which would change bytes that are not UTF-8.
			var blob struct {
				SHA string `json:"sha"`
			}
			if _, err := c.api.Do(ctx, httpapi.Request{Op: "write " + f.Path + " to " + repo.String(), Method: http.MethodPost,
				Path: httpapi.RepoPath(repo, "git", "blobs"),
				In:   map[string]string{"content": base64.StdEncoding.EncodeToString(f.Content), "encoding": "base64"}, Out: &blob}); err != nil {
				return forge.Proposal{}, err
			}
			e["sha"] = blob.SHA
		}
		tree.Tree = append(tree.Tree, e)
	}
	var made struct {
		SHA string `json:"sha"`
	}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: "write the tree of the change to " + repo.String(), Method: http.MethodPost,
		Path: httpapi.RepoPath(repo, "git", "trees"), In: tree, Out: &made}); err != nil {
		return forge.Proposal{}, err
	}
	commit := map[string]any{"message": ch.Message, "tree": made.SHA, "parents": []string{ch.BaseSHA}}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: "write the commit of the change to " + repo.String(), Method: http.MethodPost,
		Path: httpapi.RepoPath(repo, "git", "commits"), In: commit, Out: &made}); err != nil {
		return forge.Proposal{}, err
	}
	ref := map[string]string{"ref": "refs/heads/" + ch.Branch, "sha": made.SHA}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: "create branch " + ch.Branch + " of " + repo.String(), Method: http.MethodPost,
		Path: httpapi.RepoPath(repo, "git", "refs"), In: ref}); err != nil {
		return forge.Proposal{}, err
	}
	return c.api.OpenPullRequest(ctx, repo, ch)
}

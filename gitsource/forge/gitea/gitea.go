package gitea

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/httpapi"
)

// DescriptionLimit is the length cairn cuts a status description to. Gitea
// stores descriptions as TEXT and documents no limit; 255 bytes keep its
// status tooltips readable.
const DescriptionLimit = 255

// CommentLimit is cairn's own limit on a plan comment for Gitea, which
// stores comments as LONGTEXT and documents no limit: the same as GitHub's, so
// that a plan page stays quick to render. The full plan is kept as JSON
// elsewhere.
const CommentLimit = 65536

// Options configure a Client: BaseURL is the Gitea server, e.g.
// "https://gitea.example.com" (the API is under /api/v1); Token an access
// token with write access to statuses and issues; Login the account the token
// belongs to, whose plan comment is edited, asked of Gitea (GET /user) when
// empty.
type Options = forge.ClientOptions

// Client is a Gitea forge.Forge.
type Client struct {
	api   *httpapi.Client
	token string
	login *httpapi.Login
}

var _ forge.Forge = (*Client)(nil)

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	if opts.Token == "" {
		return nil, fmt.Errorf("%w: gitea client needs a token", forge.ErrInvalid)
	}
	api, err := httpapi.New(httpapi.Config{
		BaseURL:    trimSlash(opts.BaseURL) + "/api/v1",
		HTTPClient: opts.HTTPClient,
		Header:     http.Header{"Authorization": {"token " + opts.Token}, "User-Agent": {"cairn"}},
		Secrets:    []string{opts.Token},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the gitea client: %w", err)
	}
	c := &Client{api: api, token: opts.Token}
	c.login = httpapi.NewLogin(opts.Login, c.api.Login)
	return c, nil
}

func trimSlash(s string) string { return strings.TrimRight(s, "/") }

// SetStatus implements forge.Forge (POST /repos/{owner}/{repo}/statuses/{sha}).
func (c *Client) SetStatus(ctx context.Context, repo forge.RepoRef, sha string, st forge.Status) error {
	if err := httpapi.ValidateStatus(repo, sha, st); err != nil {
		return err
	}
	in := map[string]string{
		"state":       string(st.State),
		"context":     st.Context,
		"description": forge.Description(st.Description, DescriptionLimit, c.token),
		"target_url":  st.TargetURL,
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
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

func (c *Client) comments(repo forge.RepoRef, pr int) httpapi.CommentStore {
	where := fmt.Sprintf("%s#%d", repo, pr)
	number := strconv.Itoa(pr)
	return httpapi.CommentStore{
		List: func(ctx context.Context) ([]httpapi.Comment, error) {
			var out []comment
			_, err := c.api.Do(ctx, httpapi.Request{Op: "list comments on " + where, Method: http.MethodGet,
				Path: httpapi.RepoPath(repo, "issues", number, "comments"), Out: &out})
			list := make([]httpapi.Comment, len(out))
			for i, cm := range out {
				list[i] = httpapi.Comment{ID: cm.ID, Body: cm.Body, Author: cm.User.Login}
			}
			return list, err
		},
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

// PullRequest implements forge.Forge (GET /repos/{owner}/{repo}/pulls/{n}).
func (c *Client) PullRequest(ctx context.Context, repo forge.RepoRef, pr int) (forge.PR, error) {
	return c.api.PullRequest(ctx, repo, pr)
}

var _ forge.Proposer = (*Client)(nil)

// ProposeChange implements forge.Proposer: one commit of every file on a new
// branch from ch.Base (POST /repos/{owner}/{repo}/contents, which refuses an
// update whose file is no longer the blob it replaces, so a base that moved on
// under the change fails), then POST /repos/{owner}/{repo}/pulls.
func (c *Client) ProposeChange(ctx context.Context, repo forge.RepoRef, ch forge.Change) (forge.Proposal, error) {
	if err := ch.Validate(repo); err != nil {
		return forge.Proposal{}, err
	}
	type op struct {
		Operation string `json:"operation"`
		Path      string `json:"path"`
		Content   string `json:"content,omitempty"`
		SHA       string `json:"sha,omitempty"`
	}
	in := struct {
		Branch    string `json:"branch"`
		NewBranch string `json:"new_branch"`
		Message   string `json:"message"`
		Files     []op   `json:"files"`
	}{Branch: ch.Base, NewBranch: ch.Branch, Message: ch.Message}
	for _, f := range ch.Files {
		o := op{Operation: f.Op(), Path: f.Path}
		if f.Existed {
			o.SHA = forge.BlobID(f.Before)
		}
		if !f.Delete {
			o.Content = base64.StdEncoding.EncodeToString(f.Content)
		}
		in.Files = append(in.Files, o)
	}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: fmt.Sprintf("commit the change on branch %s of %s", ch.Branch, repo),
		Method: http.MethodPost, Path: httpapi.RepoPath(repo, "contents"), In: in}); err != nil {
		return forge.Proposal{}, err
	}
	return c.api.OpenPullRequest(ctx, repo, ch)
}

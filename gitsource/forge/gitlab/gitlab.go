package gitlab

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/internal/httpapi"
)

// Limits of GitLab: a commit status description and target URL are stored
// in 255-character columns; a note body holds at most 1,000,000 characters.
const (
	DescriptionLimit = 255
	TargetURLLimit   = 255
	CommentLimit     = 1000000
)

// DefaultBaseURL is gitlab.com.
const DefaultBaseURL = "https://gitlab.com"

// Options configure a Client: BaseURL is the GitLab server (DefaultBaseURL
// when empty; the API is under /api/v4); Token a personal, project or group
// access token with the api scope; Login the username the token posts as,
// whose plan note is edited, asked of GitLab (GET /user) when empty.
type Options = forge.ClientOptions

// Client is a GitLab forge.Forge.
type Client struct {
	api   *httpapi.Client
	token string
	login *httpapi.Login
}

var _ forge.Forge = (*Client)(nil)

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	if opts.Token == "" {
		return nil, fmt.Errorf("%w: gitlab client needs a token", forge.ErrInvalid)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	api, err := httpapi.New(httpapi.Config{
		BaseURL:    strings.TrimRight(opts.BaseURL, "/") + "/api/v4",
		HTTPClient: opts.HTTPClient,
		Header:     http.Header{"Private-Token": {opts.Token}, "User-Agent": {"cairn"}},
		Secrets:    []string{opts.Token},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to configure the gitlab client: %w", err)
	}
	c := &Client{api: api, token: opts.Token}
	c.login = httpapi.NewLogin(opts.Login, c.fetchLogin)
	return c, nil
}

// states maps cairn's states to GitLab's: GitLab has "failed" for both
// failure and error.
var states = map[forge.State]string{
	forge.StatePending: "pending", forge.StateSuccess: "success",
	forge.StateFailure: "failed", forge.StateError: "failed",
}

// SetStatus implements forge.Forge (POST /projects/:id/statuses/:sha). GitLab
// refuses to post a state the status is already in ("Cannot transition
// status"); that answer counts as success. A target URL longer than GitLab
// stores is left out rather than cut.
func (c *Client) SetStatus(ctx context.Context, repo forge.RepoRef, sha string, st forge.Status) error {
	if err := httpapi.ValidateStatus(repo, sha, st); err != nil {
		return err
	}
	in := map[string]string{
		"state":       states[st.State],
		"name":        st.Context,
		"description": forge.Description(st.Description, DescriptionLimit, c.token),
	}
	if st.TargetURL != "" && len(st.TargetURL) <= TargetURLLimit {
		in["target_url"] = st.TargetURL
	}
	_, err := c.api.Do(ctx, httpapi.Request{
		Op:     fmt.Sprintf("set status %s on %s@%s", st.Context, repo, sha),
		Method: http.MethodPost, Path: projectPath(repo, "statuses", sha), In: in,
	})
	if sameState(err) {
		return nil
	}
	return err
}

func sameState(err error) bool {
	var apiErr *forge.APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest &&
		strings.Contains(apiErr.Message, "Cannot transition status")
}

// projectPath addresses a project by its full path, escaped as one segment.
func projectPath(repo forge.RepoRef, rest ...string) []string {
	return append([]string{"projects", repo.String()}, rest...)
}

// UpsertPlanComment implements forge.Forge with the merge request notes API.
func (c *Client) UpsertPlanComment(ctx context.Context, repo forge.RepoRef, pr int, body string) error {
	if err := repo.Validate(); err != nil {
		return err
	}
	login, err := c.login.Get(ctx)
	if err != nil {
		return err
	}
	return httpapi.Upsert(ctx, c.notes(repo, pr), login, forge.PlanComment(body, CommentLimit))
}

type note struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	System bool   `json:"system"`
	Author *struct {
		Username string `json:"username"`
	} `json:"author"`
}

func (c *Client) notes(repo forge.RepoRef, mr int) httpapi.CommentStore {
	where := fmt.Sprintf("%s!%d", repo, mr)
	iid := strconv.Itoa(mr)
	return httpapi.CommentStore{
		List: func(ctx context.Context) ([]httpapi.Comment, error) { return c.listNotes(ctx, repo, iid, where) },
		Create: func(ctx context.Context, body string) error {
			_, err := c.api.Do(ctx, httpapi.Request{Op: "create the plan note on " + where, Method: http.MethodPost,
				Path: projectPath(repo, "merge_requests", iid, "notes"), In: map[string]string{"body": body}})
			return err
		},
		Edit: func(ctx context.Context, id int64, body string) error {
			_, err := c.api.Do(ctx, httpapi.Request{Op: "edit the plan note on " + where, Method: http.MethodPut,
				Path: projectPath(repo, "merge_requests", iid, "notes", strconv.FormatInt(id, 10)), In: map[string]string{"body": body}})
			return err
		},
	}
}

// listNotes reads the merge request's notes oldest first, 100 a page,
// following X-Next-Page for up to httpapi.MaxPages pages. System notes are
// skipped.
func (c *Client) listNotes(ctx context.Context, repo forge.RepoRef, iid, where string) ([]httpapi.Comment, error) {
	var list []httpapi.Comment
	for page := 1; page > 0 && page <= httpapi.MaxPages; {
		var out []note
		h, err := c.api.Do(ctx, httpapi.Request{Op: "list notes on " + where, Method: http.MethodGet,
			Path: projectPath(repo, "merge_requests", iid, "notes"),
			Query: url.Values{"per_page": {"100"}, "page": {strconv.Itoa(page)},
				"sort": {"asc"}, "order_by": {"created_at"}}, Out: &out})
		if err != nil {
			return nil, err
		}
		for _, n := range out {
			if !n.System && n.Author != nil {
				list = append(list, httpapi.Comment{ID: n.ID, Body: n.Body, Author: n.Author.Username})
			}
		}
		if next := httpapi.NextPage(h); next > page {
			page = next
		} else {
			page = 0
		}
	}
	return list, nil
}

func (c *Client) fetchLogin(ctx context.Context) (string, error) {
	var user struct {
		Username string `json:"username"`
	}
	_, err := c.api.Do(ctx, httpapi.Request{Op: "read the token's user", Method: http.MethodGet, Path: []string{"user"}, Out: &user})
	return user.Username, err
}

type mergeRequest struct {
	IID             int    `json:"iid"`
	SHA             string `json:"sha"`
	SourceBranch    string `json:"source_branch"`
	TargetBranch    string `json:"target_branch"`
	SourceProjectID int64  `json:"source_project_id"`
	TargetProjectID int64  `json:"target_project_id"`
	State           string `json:"state"`
	MergeSHA        string `json:"merge_commit_sha"`
	SquashSHA       string `json:"squash_commit_sha"`
	DiffRefs        *struct {
		BaseSHA  string `json:"base_sha"`
		HeadSHA  string `json:"head_sha"`
		StartSHA string `json:"start_sha"`
	} `json:"diff_refs"`
}

// PullRequest implements forge.Forge (GET /projects/:id/merge_requests/:iid).
// BaseSHA is diff_refs.start_sha, the target branch tip the diff is taken
// against (diff_refs.base_sha is the merge base); it is empty while GitLab
// has not computed diff_refs yet. For a merge request from a fork the source
// project's path is read with GET /projects/:source_project_id; when that
// fails (a deleted or private fork) HeadRepoFullName is empty.
func (c *Client) PullRequest(ctx context.Context, repo forge.RepoRef, pr int) (forge.PR, error) {
	if err := repo.Validate(); err != nil {
		return forge.PR{}, err
	}
	var mr mergeRequest
	_, err := c.api.Do(ctx, httpapi.Request{Op: fmt.Sprintf("read merge request %s!%d", repo, pr), Method: http.MethodGet,
		Path: projectPath(repo, "merge_requests", strconv.Itoa(pr)), Out: &mr})
	if err != nil {
		return forge.PR{}, err
	}
	out := forge.PR{Number: mr.IID, HeadSHA: mr.SHA, BaseRef: mr.TargetBranch, HeadRef: mr.SourceBranch,
		HeadRepoFullName: repo.String(), Fork: mr.SourceProjectID != mr.TargetProjectID, State: forge.PROpen}
	switch mr.State {
	case "merged":
		out.State, out.MergeSHA = forge.PRMerged, cmp.Or(mr.MergeSHA, mr.SquashSHA)
	case "closed", "locked":
		out.State = forge.PRClosed
	}
	if mr.DiffRefs != nil {
		out.BaseSHA = mr.DiffRefs.StartSHA
		if out.HeadSHA == "" {
			out.HeadSHA = mr.DiffRefs.HeadSHA
		}
	}
	if out.Fork {
		out.HeadRepoFullName = c.projectPath(ctx, mr.SourceProjectID)
	}
	return out, nil
}

func (c *Client) projectPath(ctx context.Context, id int64) string {
	var p struct {
		PathWithNamespace string `json:"path_with_namespace"`
	}
	if id <= 0 {
		return ""
	}
	_, err := c.api.Do(ctx, httpapi.Request{Op: "read the source project", Method: http.MethodGet,
		Path: []string{"projects", strconv.FormatInt(id, 10)}, Out: &p})
	if err != nil {
		return ""
	}
	return p.PathWithNamespace
}

var _ forge.Proposer = (*Client)(nil)

// ProposeChange implements forge.Proposer: one commit on a new branch whose
// parent is ch.BaseSHA (POST /projects/:id/repository/commits with start_sha),
// then the merge request (POST /projects/:id/merge_requests).
func (c *Client) ProposeChange(ctx context.Context, repo forge.RepoRef, ch forge.Change) (forge.Proposal, error) {
	if err := ch.Validate(repo); err != nil {
		return forge.Proposal{}, err
	}
	type action struct {
		Action   string `json:"action"`
		FilePath string `json:"file_path"`
		Content  string `json:"content,omitempty"`
		Encoding string `json:"encoding,omitempty"`
	}
	commit := struct {
		Branch   string   `json:"branch"`
		StartSHA string   `json:"start_sha"`
		Message  string   `json:"commit_message"`
		Actions  []action `json:"actions"`
	}{Branch: ch.Branch, StartSHA: ch.BaseSHA, Message: ch.Message}
	for _, f := range ch.Files {
		a := action{Action: f.Op(), FilePath: f.Path}
		if !f.Delete {
			a.Content, a.Encoding = base64.StdEncoding.EncodeToString(f.Content), "base64"
		}
		commit.Actions = append(commit.Actions, a)
	}
	if _, err := c.api.Do(ctx, httpapi.Request{Op: fmt.Sprintf("commit the change on branch %s of %s", ch.Branch, repo),
		Method: http.MethodPost, Path: projectPath(repo, "repository", "commits"), In: commit}); err != nil {
		return forge.Proposal{}, err
	}
	var mr struct {
		IID    int    `json:"iid"`
		WebURL string `json:"web_url"`
	}
	_, err := c.api.Do(ctx, httpapi.Request{Op: fmt.Sprintf("open a merge request from %s into %s of %s", ch.Branch, ch.Base, repo),
		Method: http.MethodPost, Path: projectPath(repo, "merge_requests"),
		In:  map[string]any{"source_branch": ch.Branch, "target_branch": ch.Base, "title": ch.Title, "description": ch.Body, "remove_source_branch": true},
		Out: &mr})
	return forge.Proposal{Number: mr.IID, URL: mr.WebURL}, err
}

package giteaharness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"cairn.dev/cairn/gitsource/forge"
)

// api sends a JSON request to Gitea's API as the admin (token, or basic auth
// before the token exists) and decodes the answer into out (a *[]byte gets it
// as it is).
func (g *Gitea) api(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.URL+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if g.Token != "" {
		req.Header.Set("Authorization", "token "+g.Token)
	} else {
		req.SetBasicAuth(g.AdminUser, g.AdminPassword)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("failed to %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("failed to %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (g *Gitea) createToken(ctx context.Context) error {
	var tok struct {
		Token string `json:"sha1"`
	}
	in := map[string]any{"name": "cairn-test", "scopes": []string{"all"}}
	if err := g.api(ctx, http.MethodPost, "/users/"+g.AdminUser+"/tokens", in, &tok); err != nil {
		return fmt.Errorf("failed to create an API token: %w", err)
	}
	g.Token = tok.Token
	return nil
}

// CreateRepo creates a public repository of the admin with an initial
// commit on main.
func (g *Gitea) CreateRepo(ctx context.Context, name string) (forge.RepoRef, error) {
	in := map[string]any{"name": name, "auto_init": true, "default_branch": "main", "readme": "Default"}
	if err := g.api(ctx, http.MethodPost, "/user/repos", in, nil); err != nil {
		return forge.RepoRef{}, err
	}
	return forge.RepoRef{Owner: g.AdminUser, Name: name}, nil
}

// CloneURL is the repository's HTTP URL with the admin's credentials in it,
// for go-git clones and pushes in tests.
func (g *Gitea) CloneURL(repo forge.RepoRef) string {
	u, _ := url.Parse(g.URL)
	u.User = url.UserPassword(g.AdminUser, g.Token)
	u.Path = "/" + repo.String() + ".git"
	return u.String()
}

// AddWebhook adds a Gitea-type webhook that sends events (e.g. "push",
// "pull_request") as JSON to target, signed with secret.
func (g *Gitea) AddWebhook(ctx context.Context, repo forge.RepoRef, target, secret string, events ...string) error {
	in := map[string]any{
		"type":   "gitea",
		"active": true,
		"events": events,
		"config": map[string]string{"url": target, "content_type": "json", "secret": secret},
	}
	return g.api(ctx, http.MethodPost, "/repos/"+repo.String()+"/hooks", in, nil)
}

// PutFile commits content at path on branch through the contents API and
// returns the new commit's SHA. With from set, the commit starts a new
// branch named branch from the branch from.
func (g *Gitea) PutFile(ctx context.Context, repo forge.RepoRef, branch, from, path, content string) (string, error) {
	var existing struct {
		SHA string `json:"sha"`
	}
	ref := branch
	if from != "" {
		ref = from
	}
	_ = g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/contents/"+path+"?ref="+url.QueryEscape(ref), nil, &existing)
	in := map[string]any{"content": base64.StdEncoding.EncodeToString([]byte(content)), "message": "update " + path, "branch": ref}
	if from != "" {
		in["new_branch"] = branch
	}
	method := http.MethodPost
	if existing.SHA != "" {
		method, in["sha"] = http.MethodPut, existing.SHA
	}
	var out struct {
		Commit struct {
			SHA string `json:"sha"`
		} `json:"commit"`
	}
	if err := g.api(ctx, method, "/repos/"+repo.String()+"/contents/"+path, in, &out); err != nil {
		return "", err
	}
	return out.Commit.SHA, nil
}

// BranchSHA returns the head of branch.
func (g *Gitea) BranchSHA(ctx context.Context, repo forge.RepoRef, branch string) (string, error) {
	var out struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/branches/"+url.PathEscape(branch), nil, &out)
	return out.Commit.ID, err
}

// CreatePullRequest opens a pull request from head into base and returns
// its number.
func (g *Gitea) CreatePullRequest(ctx context.Context, repo forge.RepoRef, head, base, title string) (int, error) {
	var out struct {
		Number int `json:"number"`
	}
	in := map[string]string{"head": head, "base": base, "title": title}
	err := g.api(ctx, http.MethodPost, "/repos/"+repo.String()+"/pulls", in, &out)
	return out.Number, err
}

// CommitStatus is a status as Gitea reports it.
type CommitStatus struct {
	ID          int64  `json:"id"`
	Context     string `json:"context"`
	State       string `json:"status"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

// Statuses lists every status posted on sha (all states of each context).
func (g *Gitea) Statuses(ctx context.Context, repo forge.RepoRef, sha string) ([]CommitStatus, error) {
	var out []CommitStatus
	err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/statuses/"+sha, nil, &out)
	return out, err
}

// Comment is an issue comment as Gitea reports it.
type Comment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
	User struct {
		Login string `json:"login"`
	} `json:"user"`
}

// Comments lists the comments of issue or pull request number.
func (g *Gitea) Comments(ctx context.Context, repo forge.RepoRef, number int) ([]Comment, error) {
	var out []Comment
	err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/issues/"+strconv.Itoa(number)+"/comments", nil, &out)
	return out, err
}

// Comment posts a comment as the admin on issue or pull request number.
func (g *Gitea) Comment(ctx context.Context, repo forge.RepoRef, number int, body string) error {
	return g.api(ctx, http.MethodPost, "/repos/"+repo.String()+"/issues/"+strconv.Itoa(number)+"/comments",
		map[string]string{"body": body}, nil)
}

// CreateUser creates a second, non-admin user and returns an API token of it
// (for tests of comments by someone else).
func (g *Gitea) CreateUser(ctx context.Context, name string) (string, error) {
	password := "pw-" + randomHex(8)
	in := map[string]any{"username": name, "email": name + "@example.invalid", "password": password, "must_change_password": false}
	if err := g.api(ctx, http.MethodPost, "/admin/users", in, nil); err != nil {
		return "", err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/api/v1/users/"+name+"/tokens",
		bytes.NewReader([]byte(`{"name":"t","scopes":["all"]}`)))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(name, password)
	resp, err := g.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		Token string `json:"sha1"`
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("failed to create a token for %s: %s", name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		return "", err
	}
	return tok.Token, nil
}

// RenderMarkdown renders text as Gitea renders a comment of repo, and returns
// the HTML.
func (g *Gitea) RenderMarkdown(ctx context.Context, repo forge.RepoRef, text string) (string, error) {
	var html []byte
	err := g.api(ctx, http.MethodPost, "/markdown", map[string]any{
		"Text": text, "Mode": "comment", "Context": g.URL + "/" + repo.String()}, &html)
	return string(html), err
}

// FileAt returns the content of path at ref, and whether it exists there.
func (g *Gitea) FileAt(ctx context.Context, repo forge.RepoRef, ref, path string) (string, bool, error) {
	var out struct {
		Content string `json:"content"`
	}
	err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/contents/"+path+"?ref="+url.QueryEscape(ref), nil, &out)
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return "", false, nil
		}
		return "", false, err
	}
	b, err := base64.StdEncoding.DecodeString(out.Content)
	return string(b), true, err
}

// MergePullRequest merges pull request number with a merge commit.
func (g *Gitea) MergePullRequest(ctx context.Context, repo forge.RepoRef, number int) error {
	return g.api(ctx, http.MethodPost, "/repos/"+repo.String()+"/pulls/"+strconv.Itoa(number)+"/merge",
		map[string]string{"Do": "merge"}, nil)
}

// PullRequest is a pull request as Gitea reports it.
type PullRequest struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Head  struct {
		Ref string `json:"ref"`
	} `json:"head"`
}

// PullRequestOf reads pull request number.
func (g *Gitea) PullRequestOf(ctx context.Context, repo forge.RepoRef, number int) (PullRequest, error) {
	var out PullRequest
	err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/pulls/"+strconv.Itoa(number), nil, &out)
	return out, err
}

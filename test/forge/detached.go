package giteaharness

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"cairn.dev/cairn/gitsource/forge"
)

// This file lets a command (test/localforge) leave Gitea running after it
// exits and find it again later. StartGitea already runs `gitea web` in its
// own process group and detached from the caller's context: a process that
// exits without calling Stop leaves Gitea running.

// Pid is the process id (and process-group id) of `gitea web`, 0 when it
// was not started by this process.
func (g *Gitea) Pid() int {
	if g.cmd == nil || g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// Reattach returns a Gitea for an instance started earlier (by another
// process) from what that process saved; it fails unless the API answers
// with the token. Stop does nothing on it: stop the saved pid instead.
func Reattach(ctx context.Context, url, user, password, token string) (*Gitea, error) {
	g := &Gitea{URL: url, AdminUser: user, AdminPassword: password, Token: token, http: &http.Client{Timeout: 30 * time.Second}}
	var me struct {
		Login string `json:"login"`
	}
	if err := g.api(ctx, http.MethodGet, "/user", nil, &me); err != nil {
		return nil, err
	}
	if me.Login != user {
		return nil, fmt.Errorf("the token belongs to %q, not %q", me.Login, user)
	}
	return g, nil
}

// RepoExists reports whether the admin's repository name exists.
func (g *Gitea) RepoExists(ctx context.Context, name string) bool {
	return g.api(ctx, http.MethodGet, "/repos/"+g.AdminUser+"/"+name, nil, nil) == nil
}

// RemoveWebhooks deletes the repository's webhooks that target url.
func (g *Gitea) RemoveWebhooks(ctx context.Context, repo forge.RepoRef, url string) error {
	var hooks []struct {
		ID     int64             `json:"id"`
		Config map[string]string `json:"config"`
	}
	if err := g.api(ctx, http.MethodGet, "/repos/"+repo.String()+"/hooks", nil, &hooks); err != nil {
		return err
	}
	for _, h := range hooks {
		if h.Config["url"] == url {
			if err := g.api(ctx, http.MethodDelete, fmt.Sprintf("/repos/%s/hooks/%d", repo, h.ID), nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

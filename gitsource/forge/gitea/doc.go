// Package gitea implements forge.Forge for Gitea (and API-compatible
// forks) through its REST API v1: commit statuses, the plan comment on a pull
// request (issue comments), and pull request reads. It authenticates with
// "Authorization: token <token>" and never logs the token.
package gitea

// Package gitea is the forge.Provider for Gitea (and API-compatible forks):
// a forge.Forge client of its REST API v1 (commit statuses, the plan comment
// on a pull request as an issue comment, pull request reads), and its
// webhooks (X-Gitea-Signature, the push and pull_request payloads). The
// client authenticates with "Authorization: token <token>" and never logs the
// token.
package gitea

// Package github implements forge.Forge for GitHub and GitHub Enterprise
// Server through the REST API: commit statuses, the plan comment on a pull
// request (issue comments) and pull request reads. It authenticates with
// "Authorization: Bearer <token>", sends X-GitHub-Api-Version, and never
// logs the token.
package github

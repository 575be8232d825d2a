// Package github is the forge.Provider for GitHub and GitHub Enterprise
// Server: a forge.Forge client of the REST API (commit statuses, the plan
// comment on a pull request as an issue comment, pull request reads), and its
// webhooks (X-Hub-Signature-256, the push and pull_request payloads). The
// client authenticates with "Authorization: Bearer <token>", sends
// X-GitHub-Api-Version, and never logs the token.
package github

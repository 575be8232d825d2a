// Package gitlab is the forge.Provider for GitLab: a forge.Forge client of
// the REST API v4 (external commit statuses, the plan note on a merge request,
// merge request reads), and its webhooks (the X-Gitlab-Token, Push Hook and
// Merge Request Hook payloads). The client authenticates with the
// PRIVATE-TOKEN header and never logs the token. Projects are addressed by their URL-encoded full path
// ("group/sub/project" as group%2Fsub%2Fproject), so RepoRef.Owner holds the
// group path.
package gitlab

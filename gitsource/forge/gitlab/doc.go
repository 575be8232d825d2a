// Package gitlab implements forge.Forge for GitLab through the REST API v4:
// external commit statuses, the plan note on a merge request and merge
// request reads. It authenticates with the PRIVATE-TOKEN header and never
// logs the token. Projects are addressed by their URL-encoded full path
// ("group/sub/project" as group%2Fsub%2Fproject), so RepoRef.Owner holds the
// group path.
package gitlab

package forge

import "errors"

// gitlabProject is the project object of GitLab's payloads.
type gitlabProject struct {
	PathWithNamespace string `json:"path_with_namespace"`
}

// gitlabPayload is the part of GitLab's push and merge request payloads
// cairn reads.
type gitlabPayload struct {
	ObjectKind       string         `json:"object_kind"`
	Ref              string         `json:"ref"`
	After            string         `json:"after"`
	Project          *gitlabProject `json:"project"`
	ObjectAttributes *struct {
		IID        int64  `json:"iid"`
		Action     string `json:"action"`
		OldRev     string `json:"oldrev"`
		LastCommit *struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// parseGitLab parses a GitLab delivery of event (X-Gitlab-Event). System
// hooks are read by their object_kind.
func parseGitLab(event string, body []byte) (Event, error) {
	switch event {
	case "Push Hook", "Merge Request Hook", "System Hook":
	default:
		return nil, ignore("event %q", cut(event, 40))
	}
	var p gitlabPayload
	if err := decode(body, &p); err != nil {
		return nil, err
	}
	switch p.ObjectKind {
	case "push":
		return pushEvent(SourceGitLab, p.Ref, gitlabRepo(p.Project), p.After)
	case "merge_request":
		return gitlabMergeRequest(p)
	default:
		return nil, ignore("object kind %q", cut(p.ObjectKind, 40))
	}
}

// gitlabMergeRequest maps GitLab's actions: open, reopen, and update (a push
// to the source branch when oldrev is set, an edit otherwise).
func gitlabMergeRequest(p gitlabPayload) (Event, error) {
	attrs := p.ObjectAttributes
	if attrs == nil {
		return nil, errors.New("merge request event without object_attributes")
	}
	var action string
	switch {
	case attrs.Action == "open":
		action = PROpened
	case attrs.Action == "reopen":
		action = PRReopened
	case attrs.Action == "update" && attrs.OldRev != "":
		action = PRSynchronize
	case attrs.Action == "update":
		action = PREdited
	default:
		return nil, ignore("merge request action %q", cut(attrs.Action, 40))
	}
	sha := ""
	if attrs.LastCommit != nil {
		sha = attrs.LastCommit.ID
	}
	return prEvent(SourceGitLab, gitlabRepo(p.Project), attrs.IID, action, sha)
}

func gitlabRepo(p *gitlabProject) string {
	if p == nil {
		return ""
	}
	return p.PathWithNamespace
}

package gitlab

import (
	"errors"

	"cairn.dev/cairn/gitsource/forge"
)

// project is the project object of GitLab's payloads.
type project struct {
	PathWithNamespace string `json:"path_with_namespace"`
}

// payload is the part of GitLab's push and merge request payloads cairn
// reads.
type payload struct {
	ObjectKind       string   `json:"object_kind"`
	Ref              string   `json:"ref"`
	After            string   `json:"after"`
	Project          *project `json:"project"`
	ObjectAttributes *struct {
		IID        int64  `json:"iid"`
		Action     string `json:"action"`
		OldRev     string `json:"oldrev"`
		LastCommit *struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// Parse implements forge.Webhook for Push Hook and Merge Request Hook
// deliveries; system hooks are read by their object_kind.
func (Provider) Parse(event string, body []byte) (forge.Event, error) {
	switch event {
	case "Push Hook", "Merge Request Hook", "System Hook":
	default:
		return nil, forge.Ignore("event", event)
	}
	var p payload
	if err := forge.DecodePayload(body, &p); err != nil {
		return nil, err
	}
	switch p.ObjectKind {
	case "push":
		return forge.NewPush(Name, p.Ref, p.Project.fullName(), p.After)
	case "merge_request":
		return parseMergeRequest(p)
	default:
		return nil, forge.Ignore("object kind", p.ObjectKind)
	}
}

// parseMergeRequest maps GitLab's actions: open, reopen, and update (a push
// to the source branch when oldrev is set, an edit otherwise).
func parseMergeRequest(p payload) (forge.Event, error) {
	attrs := p.ObjectAttributes
	if attrs == nil {
		return nil, errors.New("merge request event without object_attributes")
	}
	var action string
	switch {
	case attrs.Action == "open":
		action = forge.PROpened
	case attrs.Action == "reopen":
		action = forge.PRReopened
	case attrs.Action == "update" && attrs.OldRev != "":
		action = forge.PRSynchronize
	case attrs.Action == "update":
		action = forge.PREdited
	case attrs.Action == "close" || attrs.Action == "merge":
		action = forge.PRClosed
	default:
		return nil, forge.Ignore("merge request action", attrs.Action)
	}
	sha := ""
	if attrs.LastCommit != nil {
		sha = attrs.LastCommit.ID
	}
	return forge.NewPullRequest(Name, p.Project.fullName(), attrs.IID, action, sha)
}

func (p *project) fullName() string {
	if p == nil {
		return ""
	}
	return p.PathWithNamespace
}

// Package ghhook parses the webhook payloads whose shape Gitea took from
// GitHub: push and pull_request. Each forge's package names its own
// pull request actions and headers.
package ghhook

import "cairn.dev/cairn/gitsource/forge"

// repository is the repository object of the payloads.
type repository struct {
	FullName string `json:"full_name"`
}

// pushPayload is the part of a push payload cairn reads.
type pushPayload struct {
	Ref        string      `json:"ref"`
	After      string      `json:"after"`
	Repository *repository `json:"repository"`
}

// pullRequestPayload is the part of a pull_request payload cairn reads.
type pullRequestPayload struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	PullRequest *struct {
		Head *struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	Repository *repository `json:"repository"`
}

// Parse parses a delivery of event for the forge source; actions maps the
// forge's pull request actions to forge.PRAction constants, the others are
// ignored.
func Parse(source string, actions map[string]string, event string, body []byte) (forge.Event, error) {
	switch event {
	case "push":
		var p pushPayload
		if err := forge.DecodePayload(body, &p); err != nil {
			return nil, err
		}
		return forge.NewPush(source, p.Ref, p.Repository.fullName(), p.After)
	case "pull_request":
		return parsePullRequest(source, actions, body)
	default:
		return nil, forge.Ignore("event", event)
	}
}

func parsePullRequest(source string, actions map[string]string, body []byte) (forge.Event, error) {
	var p pullRequestPayload
	if err := forge.DecodePayload(body, &p); err != nil {
		return nil, err
	}
	action, ok := actions[p.Action]
	if !ok {
		return nil, forge.Ignore("pull request action", p.Action)
	}
	sha := ""
	if p.PullRequest != nil && p.PullRequest.Head != nil {
		sha = p.PullRequest.Head.SHA
	}
	return forge.NewPullRequest(source, p.Repository.fullName(), p.Number, action, sha)
}

func (r *repository) fullName() string {
	if r == nil {
		return ""
	}
	return r.FullName
}

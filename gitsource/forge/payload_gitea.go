package forge

// giteaPush is the part of Gitea's push payload cairn reads.
type giteaPush struct {
	Ref        string `json:"ref"`
	After      string `json:"after"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// giteaPullRequest is the part of Gitea's pull_request payload cairn reads.
type giteaPullRequest struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	PullRequest *struct {
		Head *struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}

// giteaActions maps Gitea's pull request actions to cairn's.
var giteaActions = map[string]string{
	"opened": PROpened, "synchronized": PRSynchronize, "reopened": PRReopened, "edited": PREdited,
}

// parseGitea parses a Gitea delivery of event (X-Gitea-Event).
func parseGitea(event string, body []byte) (Event, error) {
	switch event {
	case "push":
		var p giteaPush
		if err := decode(body, &p); err != nil {
			return nil, err
		}
		return pushEvent(SourceGitea, p.Ref, giteaRepo(p.Repository), p.After)
	case "pull_request":
		var p giteaPullRequest
		if err := decode(body, &p); err != nil {
			return nil, err
		}
		action, ok := giteaActions[p.Action]
		if !ok {
			return nil, ignore("pull request action %q", cut(p.Action, 40))
		}
		sha := ""
		if p.PullRequest != nil && p.PullRequest.Head != nil {
			sha = p.PullRequest.Head.SHA
		}
		return prEvent(SourceGitea, giteaRepo(p.Repository), p.Number, action, sha)
	default:
		return nil, ignore("event %q", cut(event, 40))
	}
}

func giteaRepo(r *struct {
	FullName string `json:"full_name"`
}) string {
	if r == nil {
		return ""
	}
	return r.FullName
}

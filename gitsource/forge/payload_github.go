package forge

// githubRepository is the repository object of GitHub's payloads.
type githubRepository struct {
	FullName string `json:"full_name"`
}

// githubPush is the part of GitHub's push payload cairn reads.
type githubPush struct {
	Ref        string            `json:"ref"`
	After      string            `json:"after"`
	Repository *githubRepository `json:"repository"`
}

// githubPullRequest is the part of GitHub's pull_request payload cairn reads.
type githubPullRequest struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	PullRequest *struct {
		Head *struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
	Repository *githubRepository `json:"repository"`
}

var githubActions = map[string]string{
	"opened": PROpened, "synchronize": PRSynchronize, "reopened": PRReopened, "edited": PREdited,
}

// parseGitHub parses a GitHub delivery of event (X-GitHub-Event).
func parseGitHub(event string, body []byte) (Event, error) {
	switch event {
	case "push":
		var p githubPush
		if err := decode(body, &p); err != nil {
			return nil, err
		}
		return pushEvent(SourceGitHub, p.Ref, githubRepo(p.Repository), p.After)
	case "pull_request":
		var p githubPullRequest
		if err := decode(body, &p); err != nil {
			return nil, err
		}
		action, ok := githubActions[p.Action]
		if !ok {
			return nil, ignore("pull request action %q", cut(p.Action, 40))
		}
		sha := ""
		if p.PullRequest != nil && p.PullRequest.Head != nil {
			sha = p.PullRequest.Head.SHA
		}
		return prEvent(SourceGitHub, githubRepo(p.Repository), p.Number, action, sha)
	default:
		return nil, ignore("event %q", cut(event, 40))
	}
}

func githubRepo(r *githubRepository) string {
	if r == nil {
		return ""
	}
	return r.FullName
}

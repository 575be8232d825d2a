package forge

import (
	"context"
	"fmt"
	"strings"
)

// Forge is what cairn needs from a Git forge. Implementations are safe for
// concurrent use; the Queue calls them from one goroutine.
type Forge interface {
	// SetStatus sets the commit status st.Context on commit sha. A later call
	// with the same context replaces the earlier state on the forge.
	SetStatus(ctx context.Context, repo RepoRef, sha string, st Status) error
	// UpsertPlanComment creates cairn's one plan comment on pull request pr,
	// or edits it in place when it exists. The comment is recognised by
	// PlanMarker at its start and by its author (the token's account), so a
	// second call never adds a second comment. body is cut to the forge's
	// comment limit with CutComment.
	UpsertPlanComment(ctx context.Context, repo RepoRef, pr int, body string) error
	// PullRequest reads pull (or merge) request pr.
	PullRequest(ctx context.Context, repo RepoRef, pr int) (PR, error)
}

// PlanMarker starts cairn's plan comment; it is an HTML comment, so the forge
// does not render it.
const PlanMarker = "<!-- cairn-plan -->"

// State is the state of a commit status.
type State string

// The commit status states cairn posts. GitLab has no "error" or "failure":
// its backend posts both as "failed".
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
	StateError   State = "error"
)

// Status is one commit status.
type Status struct {
	// Context names the status, for example "cairn/sync" or
	// "cairn/<namespace>/<name>".
	Context string
	// State is pending, success, failure or error.
	State State
	// Description is a one-line reason. It is redacted, flattened and cut to
	// the forge's limit by the backend.
	Description string
	// TargetURL links the status to more detail; empty for none.
	TargetURL string
}

// Validate reports whether st can be posted.
func (st Status) Validate() error {
	switch st.State {
	case StatePending, StateSuccess, StateFailure, StateError:
	default:
		return fmt.Errorf("%w: unknown commit status state %q", ErrInvalid, st.State)
	}
	if strings.TrimSpace(st.Context) == "" {
		return fmt.Errorf("%w: commit status without a context", ErrInvalid)
	}
	return nil
}

// PR is what cairn reads of a pull (GitLab: merge) request.
type PR struct {
	Number int
	// BaseSHA is the tip of the target branch the forge compares against.
	// GitLab computes it asynchronously: it is empty until GitLab has.
	BaseSHA string
	// HeadSHA is the tip of the source branch.
	HeadSHA string
	// BaseRef and HeadRef are branch names, without refs/heads/.
	BaseRef string
	HeadRef string
	// HeadRepoFullName is the owner/name of the repository the head branch
	// lives in; empty when that repository was deleted.
	HeadRepoFullName string
	// Fork is true when the head branch lives in another repository than the
	// base (or in a deleted one). Plans of forks get no credentials beyond
	// read access to the registries.
	Fork bool
	// State is PROpen, PRClosed or PRMerged; MergeSHA the commit a merge made
	// on the base branch (empty until merged).
	State    string
	MergeSHA string
}

// The states of a pull request.
const (
	PROpen   = "open"
	PRMerged = "merged"
	// PRClosed is closed without a merge (as a state), or closed with or
	// without one (as a webhook's action).
	PRClosed = "closed"
)

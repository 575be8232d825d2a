package forge

// Event is what a Receiver emits for an accepted delivery: a Push or a
// PullRequest.
type Event interface {
	// Repository names the repository the event is about.
	Repository() RepoRef
}

// Push says a branch moved. It only wakes the sync loop: cairn fetches the
// branch and reads its head itself.
type Push struct {
	// Source is the name of the provider that parsed it ("gitea", ...).
	Source string
	Repo   RepoRef
	// Branch is the branch name, without refs/heads/.
	Branch string
	// SHAHint is the head the payload claims; a hint for logs and for
	// deciding whether a fetch already saw it, never the revision to apply.
	// Empty when the branch was deleted.
	SHAHint string
	// Delivery is the forge's delivery id, when it sent one.
	Delivery string
}

// PullRequest says a pull (GitLab: merge) request was opened, updated,
// reopened or edited: a plan is due.
type PullRequest struct {
	Source string
	Repo   RepoRef
	Number int
	// Action is one of the PRAction constants.
	Action string
	// HeadSHAHint is the head the payload claims; read the pull request
	// through the Forge for the truth.
	HeadSHAHint string
	Delivery    string
}

// Pull request actions, normalised across forges (Gitea's "synchronized" and
// GitLab's "update" with new commits are PRSynchronize).
const (
	PROpened      = "opened"
	PRSynchronize = "synchronize"
	PRReopened    = "reopened"
	PREdited      = "edited"
)

// Repository implements Event.
func (p Push) Repository() RepoRef { return p.Repo }

// Repository implements Event.
func (p PullRequest) Repository() RepoRef { return p.Repo }

// Trigger coalesces wake-ups: any number of Fire calls before the sync loop
// reads C become one. Fire never blocks.
type Trigger struct {
	c chan struct{}
}

// NewTrigger returns a Trigger with nothing pending.
func NewTrigger() *Trigger { return &Trigger{c: make(chan struct{}, 1)} }

// Fire records a wake-up unless one is already pending.
func (t *Trigger) Fire() {
	select {
	case t.c <- struct{}{}:
	default:
	}
}

// C is the channel the sync loop waits on.
func (t *Trigger) C() <-chan struct{} { return t.c }

package report

import (
	"fmt"
	"strings"
	"sync"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/outcome"
)

// syncContext is the commit status context of a whole sync.
const syncContext = "cairn/sync"

// StatusPoster is what the forge reporter needs of forge.Queue (*forge.Queue is one).
type StatusPoster interface {
	// PostStatus queues the status st of the commit sha of repo; it must not block.
	PostStatus(repo forge.RepoRef, sha string, st forge.Status)
}

// ForgeReporter posts commit statuses for syncs: `cairn/<namespace>/<name>` for each
// instance a commit touches and `cairn/sync` for the whole, pending when the work
// starts, then success only after apply, prune and health, or failure with the reason.
// A revision left pending when a newer one starts is closed, naming the newer one.
type ForgeReporter struct {
	q         StatusPoster
	repo      forge.RepoRef
	targetURL string

	mu      sync.Mutex
	pending map[string]map[string]bool // sha -> contexts still pending
}

// NewForgeReporter reports to repo through q; targetURL (optional) is linked from
// every status.
func NewForgeReporter(q StatusPoster, repo forge.RepoRef, targetURL string) *ForgeReporter {
	return &ForgeReporter{q: q, repo: repo, targetURL: targetURL, pending: map[string]map[string]bool{}}
}

// SyncStarted marks the aggregate and every touched instance pending, and closes
// what older revisions left pending.
func (f *ForgeReporter) SyncStarted(sha string, instances []InstanceKey) {
	if !isCommit(sha) {
		return
	}
	f.supersede(sha)
	f.post(sha, syncContext, forge.StatePending, fmt.Sprintf("syncing %d instance(s)", len(instances)))
	for _, k := range instances {
		f.post(sha, instanceContext(k), forge.StatePending, "cairn is applying this commit")
	}
}

// InstanceFinished reports one instance's outcome.
func (f *ForgeReporter) InstanceFinished(sha string, k InstanceKey, res outcome.InstanceResult) {
	if !isCommit(sha) {
		return
	}
	switch res.Action {
	case outcome.ActionFailed:
		f.post(sha, instanceContext(k), forge.StateFailure, res.Reason+": "+res.Message)
		return
	case outcome.ActionProgressing: // a later sync of the same commit gives the verdict
		f.post(sha, instanceContext(k), forge.StatePending, "progressing: "+res.Message)
		return
	}
	f.post(sha, instanceContext(k), forge.StateSuccess, strings.ToLower(string(res.Action[:1]))+string(res.Action[1:])+": "+res.Message)
}

// SyncFinished reports the aggregate.
func (f *ForgeReporter) SyncFinished(sha string, res *outcome.SyncResult) {
	if !isCommit(sha) {
		return
	}
	ready, failed, progressing := 0, 0, 0
	for _, i := range res.Instances {
		switch {
		case i.Action == outcome.ActionFailed:
			failed++
		case i.Action == outcome.ActionProgressing:
			progressing++
		case i.Ready:
			ready++
		}
	}
	switch {
	case res.Error != nil:
		f.post(sha, syncContext, forge.StateFailure, res.Error.Error())
	case failed > 0:
		f.post(sha, syncContext, forge.StateFailure, fmt.Sprintf("%d instance(s) failed, %d ready", failed, ready))
	case progressing > 0:
		f.post(sha, syncContext, forge.StatePending, fmt.Sprintf("%d instance(s) ready, %d progressing", ready, progressing))
	default:
		f.post(sha, syncContext, forge.StateSuccess, fmt.Sprintf("%d instance(s) ready", ready))
	}
	f.mu.Lock()
	if len(f.pending[sha]) == 0 { // progressing contexts stay pending until a verdict or a newer commit
		delete(f.pending, sha)
	}
	f.mu.Unlock()
}

func (f *ForgeReporter) post(sha, context string, state forge.State, desc string) {
	f.mu.Lock()
	if f.pending[sha] == nil {
		f.pending[sha] = map[string]bool{}
	}
	if state == forge.StatePending {
		f.pending[sha][context] = true
	} else {
		delete(f.pending[sha], context)
	}
	f.mu.Unlock()
	f.q.PostStatus(f.repo, sha, forge.Status{Context: context, State: state, Description: desc, TargetURL: f.targetURL})
}

// supersede closes the statuses older revisions left pending; newer is a commit
// (isCommit), named by its first 12 hex digits.
func (f *ForgeReporter) supersede(newer string) {
	f.mu.Lock()
	old := f.pending
	f.pending = map[string]map[string]bool{}
	if same, ok := old[newer]; ok { // a recheck of the same commit keeps what it left pending
		f.pending[newer] = same
		delete(old, newer)
	}
	f.mu.Unlock()
	for sha, contexts := range old {
		for c := range contexts {
			f.q.PostStatus(f.repo, sha, forge.Status{Context: c, State: forge.StateError,
				Description: "superseded by " + gitsource.ShortSHA(newer) + " before it finished", TargetURL: f.targetURL})
		}
	}
}

func instanceContext(k InstanceKey) string { return "cairn/" + k.Namespace + "/" + k.Name }

// isCommit tells a Git SHA from a directory revision (which has no forge).
func isCommit(sha string) bool { return len(sha) == 40 && !strings.Contains(sha, ":") }

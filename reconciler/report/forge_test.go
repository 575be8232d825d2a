package report

import (
	"errors"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/reconciler/outcome"
)

type posted struct {
	sha string
	st  forge.Status
}

type fakePoster struct {
	mu  sync.Mutex
	all []posted
}

func (p *fakePoster) PostStatus(_ forge.RepoRef, sha string, st forge.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = append(p.all, posted{sha, st})
}

// last returns the newest status of each context on sha.
func (p *fakePoster) last(sha string) map[string]forge.Status {
	out := map[string]forge.Status{}
	for _, x := range p.all {
		if x.sha == sha {
			out[x.st.Context] = x.st
		}
	}
	return out
}

var (
	sha1 = strings.Repeat("a", 40)
	sha2 = strings.Repeat("b", 40)
)

func TestForgeReporterPendingThenOutcome(t *testing.T) {
	g := NewWithT(t)
	p := &fakePoster{}
	r := NewForgeReporter(p, forge.RepoRef{Owner: "o", Name: "r"}, "")
	a, b := InstanceKey{"team", "a"}, InstanceKey{"team", "b"}
	r.SyncStarted(sha1, []InstanceKey{a, b})
	g.Expect(p.last(sha1)).To(HaveLen(3))
	g.Expect(p.last(sha1)["cairn/team/a"].State).To(Equal(forge.StatePending))
	g.Expect(p.last(sha1)["cairn/sync"].State).To(Equal(forge.StatePending))

	r.InstanceFinished(sha1, a, outcome.InstanceResult{Action: "Updated", Ready: true, Message: "4 objects applied"})
	r.InstanceFinished(sha1, b, outcome.InstanceResult{Action: "Failed", Reason: "RenderFailed", Message: "modules/app/app.cue:3:1: boom"})
	r.SyncFinished(sha1, &outcome.SyncResult{Instances: []outcome.InstanceResult{{Action: "Updated", Ready: true}, {Action: "Failed"}}})
	last := p.last(sha1)
	g.Expect(last["cairn/team/a"].State).To(Equal(forge.StateSuccess))
	g.Expect(last["cairn/team/b"].State).To(Equal(forge.StateFailure))
	g.Expect(last["cairn/team/b"].Description).To(ContainSubstring("RenderFailed: modules/app/app.cue:3:1"))
	g.Expect(last["cairn/sync"].State).To(Equal(forge.StateFailure))
	g.Expect(last["cairn/sync"].Description).To(Equal("1 instance(s) failed, 1 ready"))
}

func TestForgeReporterClosesSupersededPendingStatuses(t *testing.T) {
	g := NewWithT(t)
	p := &fakePoster{}
	r := NewForgeReporter(p, forge.RepoRef{Owner: "o", Name: "r"}, "https://cairn.example.com")
	a := InstanceKey{"team", "a"}
	r.SyncStarted(sha1, []InstanceKey{a}) // never finishes
	r.SyncStarted(sha2, []InstanceKey{a})
	old := p.last(sha1)
	g.Expect(old["cairn/sync"].State).To(Equal(forge.StateError))
	g.Expect(old["cairn/team/a"].Description).To(Equal("superseded by bbbbbbbbbbbb before it finished"))
	g.Expect(old["cairn/team/a"].TargetURL).To(Equal("https://cairn.example.com"))
	g.Expect(p.last(sha2)["cairn/sync"].State).To(Equal(forge.StatePending))
}

func TestForgeReporterSkipsDirectoryRevisionsAndReportsUnusableRevisions(t *testing.T) {
	g := NewWithT(t)
	p := &fakePoster{}
	r := NewForgeReporter(p, forge.RepoRef{Owner: "o", Name: "r"}, "")
	r.SyncStarted("dir:0123456789ab", nil)
	g.Expect(p.all).To(BeEmpty())
	r.SyncFinished(sha1, &outcome.SyncResult{Error: errors.New("platform.yaml:3: Platform cluster: spec.foo: unknown field")})
	g.Expect(p.last(sha1)["cairn/sync"].Description).To(ContainSubstring("platform.yaml:3"))
}

func TestForgeReporterLeavesProgressingPendingUntilTheRecheck(t *testing.T) {
	g := NewWithT(t)
	p := &fakePoster{}
	r := NewForgeReporter(p, forge.RepoRef{Owner: "o", Name: "r"}, "")
	a, b := InstanceKey{"team", "a"}, InstanceKey{"team", "b"}
	r.SyncStarted(sha1, []InstanceKey{a, b})
	r.InstanceFinished(sha1, a, outcome.InstanceResult{Action: "Progressing", Message: "applied; waiting for 1 object"})
	r.InstanceFinished(sha1, b, outcome.InstanceResult{Action: "Updated", Ready: true, Message: "2 objects applied"})
	r.SyncFinished(sha1, &outcome.SyncResult{Instances: []outcome.InstanceResult{{Action: "Progressing"}, {Action: "Updated", Ready: true}}})
	last := p.last(sha1)
	g.Expect(last["cairn/team/a"].State).To(Equal(forge.StatePending))
	g.Expect(last["cairn/team/a"].Description).To(HavePrefix("progressing: "))
	g.Expect(last["cairn/sync"].State).To(Equal(forge.StatePending))
	g.Expect(last["cairn/sync"].Description).To(Equal("1 instance(s) ready, 1 progressing"))

	// the recheck of the same commit gives the verdict
	r.SyncStarted(sha1, []InstanceKey{a})
	r.InstanceFinished(sha1, a, outcome.InstanceResult{Action: "Updated", Ready: true, Message: "1 objects applied"})
	r.SyncFinished(sha1, &outcome.SyncResult{Instances: []outcome.InstanceResult{{Action: "Updated", Ready: true}, {Action: "Unchanged", Ready: true}}})
	g.Expect(p.last(sha1)["cairn/team/a"].State).To(Equal(forge.StateSuccess))
	g.Expect(p.last(sha1)["cairn/sync"].State).To(Equal(forge.StateSuccess))
}

func TestForgeReporterSupersedesAProgressingCommit(t *testing.T) {
	g := NewWithT(t)
	p := &fakePoster{}
	r := NewForgeReporter(p, forge.RepoRef{Owner: "o", Name: "r"}, "")
	a := InstanceKey{"team", "a"}
	r.SyncStarted(sha1, []InstanceKey{a})
	r.InstanceFinished(sha1, a, outcome.InstanceResult{Action: "Progressing", Message: "applied; waiting"})
	r.SyncFinished(sha1, &outcome.SyncResult{Instances: []outcome.InstanceResult{{Action: "Progressing"}}})
	r.SyncStarted(sha1, nil) // a recheck that has nothing due yet
	r.SyncFinished(sha1, &outcome.SyncResult{Instances: []outcome.InstanceResult{{Action: "Progressing"}}})
	r.SyncStarted(sha2, []InstanceKey{a})
	g.Expect(p.last(sha1)["cairn/team/a"].State).To(Equal(forge.StateError), "a newer commit closes what the older left progressing")
}

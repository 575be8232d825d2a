package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler/outcome"
)

func TestProviderVerdict(t *testing.T) {
	ready := &InstanceOutcome{SatisfiesDependents: true}
	progressing := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionProgressing}}
	failed := &InstanceOutcome{Result: InstanceResult{Action: outcome.ActionFailed}}
	tests := []struct {
		name    string
		dep     dependencyState
		pending bool
		message string
	}{
		{name: "ready provider", dep: dependencyState{key: "infra/p", declared: true, outcome: ready, kinds: []string{"W.x"}}},
		{name: "no outcome yet", dep: dependencyState{key: "infra/p", declared: true, kinds: []string{"W.x"}}, pending: true},
		{name: "progressing", dep: dependencyState{key: "infra/p", declared: true, outcome: progressing, kinds: []string{"W.x"}},
			message: "provider infra/p of W.x is progressing: applied, not yet healthy"},
		{name: "failed", dep: dependencyState{key: "infra/p", declared: true, outcome: failed, kinds: []string{"W.x", "V.x"}},
			message: "provider infra/p of W.x, V.x is not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f, pending := dependencyVerdict([]dependencyState{tt.dep})
			g.Expect(pending).To(Equal(tt.pending))
			if tt.message == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Reason).To(Equal("ProviderNotReady"))
			g.Expect(f.Err).To(MatchError(tt.message))
		})
	}
}

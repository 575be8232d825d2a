package main

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestLeaderElectionNamespace(t *testing.T) {
	tests := []struct {
		name, flag, podNamespace, want string
	}{
		{"the flag first", "ops", "cairn", "ops"},
		{"then the pod's namespace", "", "cairn", "cairn"},
		{"else cairn-system", "", "", "cairn-system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tt.podNamespace)
			g := NewWithT(t)
			g.Expect((&controllerFlags{leaderNS: tt.flag}).leaderNamespace()).To(Equal(tt.want))
		})
	}
}

func TestControllerRefusesANonPositiveInterval(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "controller", "--interval", "0", "--repo", t.TempDir())
	g.Expect(r.err).To(MatchError("--interval must be positive"))
}

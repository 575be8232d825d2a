package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestLookupAllowed: a chart never reads cairn's namespace; an instance that applies
// as cairn reads only its own namespace (RBAC decides for one with a ServiceAccount).
func TestLookupAllowed(t *testing.T) {
	in := &revisionInput{e: &Engine{}}
	r := &instanceState{instancePlan: instancePlan{mi: &cairnv1.ModuleInstance{}}}
	r.mi.Namespace, r.mi.Name = "team-a", "web"
	for _, tc := range []struct {
		name, sa, namespace, want string
	}{
		{"own namespace as cairn", "", "team-a", ""},
		{"another namespace as cairn", "", "team-b", "reads only its own namespace team-a, not namespace team-b"},
		{"every namespace as cairn", "", "", "reads only its own namespace team-a, not every namespace"},
		{"another namespace as a ServiceAccount", "deployer", "team-b", ""},
		{"every namespace as a ServiceAccount", "deployer", "", ""},
		{"cairn's namespace", "deployer", DefaultNamespace, "cairn's namespace " + DefaultNamespace + " is never read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := in.lookupAllowed(r.mi, tc.sa, tc.namespace)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

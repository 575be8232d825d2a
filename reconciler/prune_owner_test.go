package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/render/declarations"
)

// TestTrailerCoversTheInstancesItsCommitChanges: with tenants, the trailer speaks for
// an instance whose declaration file the commit changes, for a removed instance when
// the commit changes a file of its owner, for none when the diff is unknown; without
// tenants, for every instance.
func TestTrailerCoversTheInstancesItsCommitChanges(t *testing.T) {
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	removed := func(ns, name, file string) *cairnv1.ModuleInstance {
		return &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{sourceAnnotation: file}}}
	}
	instances := map[string]*cairnv1.ModuleInstance{
		"tool": set.Instance("ops", "tool"), "web": set.Instance("team-a", "web"),
		"gone-a": removed("team-a", "gone", "tenants/team-a/gone.yaml"), "gone-p": removed("ops", "gone", "instances/gone.yaml"),
	}
	for _, tc := range []struct {
		name    string
		changed []string
		covered []string
	}{
		{name: "unknown diff"},
		{name: "a tenant's file", changed: []string{"tenants/team-a/web.yaml"}, covered: []string{"web", "gone-a"}},
		{name: "the removed instance's file", changed: []string{"tenants/team-a/gone.yaml"}, covered: []string{"gone-a"}},
		{name: "a platform file", changed: []string{"README.md"}, covered: []string{"gone-p"}},
		{name: "the platform's instance's file", changed: []string{"instances/tool.yaml", "modules/app/main.cue"}, covered: []string{"tool", "gone-p"}},
		{name: "nothing", changed: []string{}},
	} {
		rev := Revision{Changed: tc.changed}
		in := &revisionInput{set: set, rev: rev, changes: newChanges(rev, "."), guard: prune.NewGuard(set.Platform, "")}
		var covered []string
		for name, mi := range instances {
			if in.trailerCovers(mi, name == "gone-a" || name == "gone-p") {
				covered = append(covered, name)
			}
		}
		NewWithT(t).Expect(covered).To(ConsistOf(tc.covered), tc.name)
		in.guard = prune.NewGuard(nil, "") // no tenants
		for name, mi := range instances {
			NewWithT(t).Expect(in.trailerCovers(mi, name == "gone-a" || name == "gone-p")).To(BeTrue(), "without tenants: %s, %s", tc.name, name)
		}
	}
}

func TestOwnersOfLiveInstances(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	s := &RevisionState{revisionInput: revisionInput{set: set}, clusterView: clusterView{live: map[string]*cairnv1.ModuleInstance{}}}
	for _, mi := range []*cairnv1.ModuleInstance{
		set.Instance("ops", "tool"), set.Instance("team-a", "web"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gone", Annotations: map[string]string{sourceAnnotation: "tenants/team-a/gone.yaml"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "old"}}, // records no source: the platform's
	} {
		s.live[mi.Namespace+"/"+mi.Name] = mi
	}
	g.Expect(s.ownerOf(set.Instance("team-a", "web"))).To(Equal("team-a"))
	g.Expect(s.liveByOwner()).To(Equal(map[string]int{"": 2, "team-a": 2}))
}

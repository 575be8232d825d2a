package shard

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestOfIsStable pins a few values: changing the hash would move instances between
// shards when replicas of two versions run side by side.
func TestOfIsStable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Of("team-a", "web", 3)).To(Equal(Of("team-a", "web", 3)))
	g.Expect([]int{Of("team-a", "web", 3), Of("team-a", "db", 3), Of("team-b", "web", 3), Of("team-a", "web", 16)}).
		To(Equal([]int{0, 1, 1, 3}))
	g.Expect(hashOf("team-a", "web")).To(Equal(uint32(3119282787)), "FNV-1a 32 of team-a/web")
	g.Expect(Of("team-a", "web", 1)).To(Equal(0))
	g.Expect(Of("team-a", "web", 0)).To(Equal(0))
	// The separator keeps namespace and name apart.
	g.Expect(hashOf("a", "bc")).NotTo(Equal(hashOf("ab", "c")))
}

func TestOfSpreads(t *testing.T) {
	g := NewWithT(t)
	for _, shards := range []int{3, 4, 7} {
		counts := make([]int, shards)
		for k := range 10000 {
			i := Of(fmt.Sprintf("team-%d", k%37), fmt.Sprintf("app-%d", k), shards)
			g.Expect(i).To(BeNumerically(">=", 0))
			g.Expect(i).To(BeNumerically("<", shards))
			counts[i]++
		}
		even := 10000.0 / float64(shards)
		for i, c := range counts {
			g.Expect(float64(c)).To(BeNumerically("~", even, even/10), "shard %d of %d: %v", i, shards, counts)
		}
	}
}

func TestMemberLeaseNameIsAValidDistinctName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(MemberLeaseName("cairn-0")).To(Equal("cairn-replica-cairn-0"))
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	seen := map[string]string{}
	for _, id := range []string{"cairn-0", "Cairn-0", "cairn-7d9f_0b5e1c3a-4f6e-4c1d-9a8b-2c3d4e5f6a7b", "a_b", "a-b", "_", "-x-", "a.b", string(long)} {
		name := MemberLeaseName(id)
		g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), "%q → %q", id, name)
		g.Expect(seen).NotTo(HaveKey(name), "%q and %q", id, seen[name])
		seen[name] = id
	}
}

func TestOptionsAreChecked(t *testing.T) {
	g := NewWithT(t)
	api := newFakeAPI()
	good := fastOptions("a", 3)
	_, err := New(api.CoordinationV1(), good)
	g.Expect(err).NotTo(HaveOccurred())
	for name, change := range map[string]func(*Options){
		"no namespace":        func(o *Options) { o.Namespace = "" },
		"no identity":         func(o *Options) { o.Identity = "" },
		"0 shards":            func(o *Options) { o.Shards = 0 },
		"deadline past lease": func(o *Options) { o.RenewDeadline = o.LeaseDuration },
		"retry past deadline": func(o *Options) { o.RetryPeriod = o.RenewDeadline },
		"no retry period":     func(o *Options) { o.RetryPeriod = 0 },
	} {
		opts := good
		change(&opts)
		_, err := New(api.CoordinationV1(), opts)
		g.Expect(err).To(MatchError(ContainSubstring("invalid shard options")), name)
	}
	g.Expect(DefaultOptions("cairn-system", "a", 3).validate()).To(Succeed())
}

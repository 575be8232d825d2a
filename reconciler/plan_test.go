package reconciler

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestChangesTouches(t *testing.T) {
	g := NewWithT(t)
	c := newChanges(Revision{Changed: []string{"platform/instances/a.yaml", "platform/modules/app/app.cue", "other/x"}}, "platform")
	g.Expect(c.touches("instances/a.yaml")).To(BeTrue())
	g.Expect(c.touches("./modules/app")).To(BeTrue())
	g.Expect(c.touches("modules/ap")).To(BeFalse())
	g.Expect(c.touches("instances/b.yaml")).To(BeFalse())
	g.Expect(newChanges(Revision{}, ".").touches("anything")).To(BeTrue(), "an unknown diff touches everything")
	g.Expect(newChanges(Revision{Changed: []string{}}, ".").touches("a")).To(BeFalse())
}

func TestRetryAfter(t *testing.T) {
	g := NewWithT(t)
	g.Expect(retryAfter(Transient, 1)).To(Equal(5 * time.Second))
	g.Expect(retryAfter(Transient, 3)).To(Equal(20 * time.Second))
	g.Expect(retryAfter(Transient, 30)).To(Equal(5 * time.Minute))
	g.Expect(retryAfter(Stalled, 1)).To(Equal(30 * time.Minute))
}

func TestRemovalOrderPutsDependentsFirst(t *testing.T) {
	g := NewWithT(t)
	mk := func(name string, deps ...string) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{}
		mi.Namespace, mi.Name = "ns", name
		for _, d := range deps {
			mi.Spec.DependsOn = append(mi.Spec.DependsOn, cairnv1.InstanceReference{Name: d})
		}
		return mi
	}
	order := removalOrder([]*cairnv1.ModuleInstance{mk("base"), mk("web", "redis"), mk("redis", "base")})
	var names []string
	for _, mi := range order {
		names = append(names, mi.Name)
	}
	g.Expect(names).To(Equal([]string{"web", "redis", "base"}))
}

func TestInventoryRoundTripsThroughSecretEncoding(t *testing.T) {
	g := NewWithT(t)
	in := inv("a_b__ConfigMap", "_c__Namespace").entries()
	data, err := encodeEntries(in)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := decodeEntries(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(in))
}

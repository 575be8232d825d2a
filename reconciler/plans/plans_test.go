package plans

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"cairn.dev/cairn/reconciler"
)

// TestStore: a plan is kept, replaced by the next plan of its pull request, marked
// merged, listed newest first; one too large is kept without its diffs.
func TestStore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := Store{Client: fake.NewClientBuilder().WithScheme(reconciler.Scheme).Build(), Namespace: "cairn-system"}
	plan := func(rev, diff string) *reconciler.Plan {
		return &reconciler.Plan{Revision: rev, Instances: []reconciler.InstancePlan{{Namespace: "team-a", Name: "web", Action: "Update", Diff: diff}}}
	}
	g.Expect(s.Save(ctx, &Record{Number: 7, HeadSHA: "a", State: "open", PlannedAt: time.Now(), Plan: plan("a", "-x\n+y\n")})).To(Succeed())
	g.Expect(s.Save(ctx, &Record{Number: 7, HeadSHA: "b", State: "open", PlannedAt: time.Now(), Plan: plan("b", "-x\n+z\n")})).To(Succeed())
	g.Expect(s.Save(ctx, &Record{Number: 9, HeadSHA: "c", State: "open", PlannedAt: time.Now(), Plan: plan("c", "")})).To(Succeed())
	g.Expect(s.SetState(ctx, 7, "merged", "m")).To(Succeed())
	g.Expect(s.SetState(ctx, 8, "merged", "m")).To(Succeed(), "no plan kept: nothing to do")
	list, err := s.Summaries(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(2))
	g.Expect(list[0].Number).To(Equal(9))
	g.Expect(list[1].HeadSHA).To(Equal("b"))
	g.Expect(list[1].State).To(Equal("merged"))
	g.Expect(list[1].MergeSHA).To(Equal("m"))
	g.Expect(list[1].MergedAt).NotTo(BeNil())
	g.Expect(list[1].Instances).To(Equal([]SummaryInstance{{Namespace: "team-a", Name: "web", Action: "Update"}}))
	r7, err := s.Get(ctx, 7)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r7.Plan.Instances[0].Diff).To(Equal("-x\n+z\n"))

	noise := make([]byte, 1<<20) // random: gzip cannot bring it under the limit
	_, _ = rand.Read(noise)
	g.Expect(s.Save(ctx, &Record{Number: 10, HeadSHA: "d", State: "open", Plan: plan("d", hex.EncodeToString(noise))})).To(Succeed())
	r, err := s.Get(ctx, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.DiffsLeftOut).To(BeTrue())
	g.Expect(r.Plan.Instances[0].Diff).To(BeEmpty())
	g.Expect(r.Plan.Instances[0].Action).To(BeEquivalentTo("Update"))
}

// TestStoreIsBounded: the newest KeepDone merged or closed plans are kept, and at
// most MaxPlans in all, the oldest going first.
func TestStoreIsBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := Store{Client: fake.NewClientBuilder().WithScheme(reconciler.Scheme).Build(), Namespace: "cairn-system"}
	plan := &reconciler.Plan{Revision: "r"}
	for n := 1; n <= KeepDone+5; n++ {
		g.Expect(s.Save(ctx, &Record{Number: n, State: "merged", MergeSHA: "m", Plan: plan})).To(Succeed())
	}
	for n := 100; n < 100+MaxPlans; n++ {
		g.Expect(s.Save(ctx, &Record{Number: n, State: "open", Plan: plan})).To(Succeed())
	}
	list, err := s.Summaries(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(HaveLen(MaxPlans))
	g.Expect(list[len(list)-1].Number).To(Equal(100), "every merged one went before an open one")
}

package e2e

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
)

// syncRendering syncs repo and returns the result and the instances it rendered.
func (e *env) syncRendering(repo *gitRepo) (*reconciler.SyncResult, []string) {
	e.t.Helper()
	before := len(e.progress.String())
	res := e.sync(repo)
	var rendered []string
	for _, line := range strings.Split(e.progress.String()[before:], "\n") {
		if rest, ok := strings.CutPrefix(line, "render "+e.ns+"/"); ok && !strings.Contains(rest, ": cached") {
			rendered = append(rendered, strings.Fields(rest)[0])
		}
	}
	return res, rendered
}

// TestFailedInstancesAreRetriedOnTheirSchedule: a stalled instance (a) and its
// waiting dependent (b) are not re-rendered by a sync of the same revision before
// their nextRetryAt; b is retried after its 5 s backoff, then backs off to 10 s; a
// after its 30 minutes (moved back here by hand) and at once on a new commit. The
// unrelated instance c is never touched.
func TestFailedInstancesAreRetriedOnTheirSchedule(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	b := inst{name: "b", ns: e.ns, replicas: 0, dependsOn: []string{"a"}}
	c := inst{name: "c", ns: e.ns, replicas: 0}
	repo := newGitRepo(t, appRepo("", a, b, c))
	e.syncClean(repo)
	bad := replaceOnce(a.yaml(), "    configs:\n", "    badService: true\n    configs:\n")
	repo.commit("an invalid Service", map[string]string{"instances/a.yaml": bad})
	res, rendered := e.syncRendering(repo)
	e.g.Expect(rendered).To(ConsistOf("a", "b"))
	e.g.Expect(result(res, e.ns, "a").Retry).To(Equal(outcome.Stalled))
	e.g.Expect(result(res, e.ns, "b").Retry).To(Equal(outcome.Waiting))
	bNext := e.instance(e.ns, "b").Status.NextRetryAt.Time
	e.g.Expect(res.NextRetry()).To(BeTemporally("~", bNext, time.Second), "the earliest retry is b's")

	// An early sync of the same revision retries nothing.
	res, rendered = e.syncRendering(repo)
	e.g.Expect(rendered).To(BeEmpty())
	ra := result(res, e.ns, "a")
	e.g.Expect(ra.Action).To(BeEquivalentTo("Failed"), "a failed instance that is not retried is still failed")
	e.g.Expect(ra.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	e.g.Expect(ra.Message).To(ContainSubstring("not retried before"))
	e.g.Expect(result(res, e.ns, "c").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(e.instance(e.ns, "a").Status.Failures).To(Equal(int32(1)))
	e.g.Expect(e.instance(e.ns, "b").Status.Failures).To(Equal(int32(1)))

	// After its 5 s, b is retried (and still waits on a); a is not.
	time.Sleep(time.Until(bNext))
	retried := time.Now()
	_, rendered = e.syncRendering(repo)
	e.g.Expect(rendered).To(Equal([]string{"b"}))
	mb := e.instance(e.ns, "b")
	e.g.Expect(mb.Status.Failures).To(Equal(int32(2)))
	e.g.Expect(mb.Status.History).To(HaveLen(1), "b applied nothing since its first sync")
	e.g.Expect(mb.Status.NextRetryAt.Time).To(BeTemporally("~", retried.Add(10*time.Second), 2*time.Second), "5s·2ⁿ")

	// 30 minutes later (moved back by hand), a is retried.
	ma := e.instance(e.ns, "a")
	before := ma.DeepCopy()
	ma.Status.NextRetryAt = &metav1.Time{Time: time.Now().Add(-time.Second)}
	e.g.Expect(e.c.Status().Patch(e.ctx, ma, client.MergeFrom(before))).To(Succeed())
	_, rendered = e.syncRendering(repo)
	e.g.Expect(rendered).To(ContainElement("a"))
	e.g.Expect(e.instance(e.ns, "a").Status.Failures).To(Equal(int32(2)))

	// A new commit retries a at once.
	repo.commit("unrelated", map[string]string{"README.md": "again\n"})
	res, rendered = e.syncRendering(repo)
	e.g.Expect(rendered).To(ContainElement("a"))
	e.g.Expect(rendered).NotTo(ContainElement("c"))
	e.g.Expect(result(res, e.ns, "a").Message).NotTo(ContainSubstring("not retried"))
	e.g.Expect(e.instance(e.ns, "a").Status.Failures).To(Equal(int32(3)))
}

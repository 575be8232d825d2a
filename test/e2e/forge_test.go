package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/gitsource/forge"
)

// How soon after a push cairn must start on the pushed commit (its cairn/sync
// status appears): far below the 10-minute poll interval, so only the webhook can
// explain it. Applied and Ready then waits for the Deployment's rollout, which on a
// loaded 2-core machine can take tens of seconds (kube-controller-manager, kwok);
// the log shows the actual figures.
const (
	webhookStartBound = 5 * time.Second
	webhookSyncBound  = 90 * time.Second
)

// renderErrorAt matches the module file and line a render error names.
var renderErrorAt = regexp.MustCompile(`modules/app/app\.cue:\d+`)

// TestForgeLoop drives the real `cairn sync` binary against a real Gitea and the
// local cluster: pushes sync through the webhook and get commit statuses, a broken
// push fails with file:line and leaves the last good state, a fix turns green, and
// pull requests get one plan comment (updated in place) and a cairn/plan status.
func TestForgeLoop(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	a := inst{name: "a", ns: e.ns, replicas: 1, configs: configs("x")}
	b := inst{name: "b", ns: e.ns, replicas: 1}
	f, first := newForgeEnv(t, e, appRepo("", a, b))
	f.startCairn(bin)
	f.firstSync(first)

	b.replicas, b.configs = 2, configs("y")
	f.webhookSync(b)
	a.replicas = -4
	broken := f.brokenPush(a)
	a.replicas, a.configs = 1, configs("x", "w")
	main := f.fixPush(a, broken)

	f.pullRequestPlans(a, main)
	f.brokenPullRequest(b)
	f.expectNothingPending()

	took, err := f.cairn.stop(15 * time.Second)
	f.g.Expect(err).NotTo(HaveOccurred(), "cairn sync must exit cleanly on SIGTERM:\n%s", f.cairn)
	t.Logf("cairn exited %s after SIGTERM", took.Round(time.Millisecond))
	out := f.cairn.out.String()
	f.g.Expect(out).NotTo(ContainSubstring(f.gitea.Token), "the forge token is never printed")
	f.g.Expect(out).NotTo(ContainSubstring(f.secret), "the webhook secret is never printed")
}

// firstSync: the loop's first step applies the branch head and reports it.
func (f *forgeEnv) firstSync(sha string) {
	f.t.Helper()
	begin := time.Now()
	for _, name := range []string{"a", "b"} {
		f.waitInstance(name, sha, begin, 90*time.Second)
	}
	f.t.Logf("first sync of %s applied and Ready in %s", sha[:12], time.Since(begin).Round(time.Millisecond))
	f.waitState(sha, "cairn/sync", "success")
	for _, name := range []string{"a", "b"} {
		f.g.Expect(f.latest(sha, "cairn/"+f.ns+"/"+name).State).To(Equal("success"), name)
	}
}

// webhookSync: a push to main starts a sync within seconds and is applied soon
// after (the interval is 10 minutes), and its SHA gets pending then success for
// cairn/sync and the touched instance only. The change scales a Deployment, so the
// instance is in progress (waiting for health) long enough for its pending status
// to be posted before the queue would coalesce it with the outcome.
func (f *forgeEnv) webhookSync(b inst) {
	f.t.Helper()
	begin := time.Now()
	sha := f.pushAndWaitStart("scale b, one more config", map[string]string{"instances/b.yaml": b.yaml()})
	took := f.waitInstance("b", sha, begin, webhookSyncBound)
	f.t.Logf("b applied and Ready %s after the push", took.Round(time.Millisecond))
	f.g.Eventually(f.cairn.out.String, 10*time.Second, 50*time.Millisecond).Should(ContainSubstring("synced revision " + sha))
	f.g.Expect(f.configMap(f.ns, "b-y")).NotTo(BeNil())
	f.g.Expect(f.deploymentReplicas("b")).To(Equal(int32(2)))

	sync := f.waitState(sha, "cairn/sync", "success")
	f.g.Expect(sync.Description).To(Equal("2 instance(s) ready"), "the aggregate counts the whole platform")
	touched := "cairn/" + f.ns + "/b"
	// pending (again while a slow rollout is rechecked), then success
	f.g.Expect(slices.Compact(f.states(sha, "cairn/sync"))).To(Equal([]string{"pending", "success"}))
	f.g.Expect(slices.Compact(f.states(sha, touched))).To(Equal([]string{"pending", "success"}))
	f.g.Expect(f.statuses(sha)).To(HaveLen(2), "only cairn/sync and the touched instance get statuses: %v", f.statuses(sha))
	f.g.Expect(f.statuses(sha)).NotTo(HaveKey("cairn/" + f.ns + "/a"))
}

// pushAndWaitStart pushes files to main and expects cairn to start on the pushed
// commit (its cairn/sync status appears) within webhookStartBound.
func (f *forgeEnv) pushAndWaitStart(msg string, files map[string]string) string {
	f.t.Helper()
	begin := time.Now()
	sha := f.push(msg, files)
	pushed := time.Since(begin)
	f.g.Eventually(func() []string { return f.states(sha, "cairn/sync") }, webhookStartBound, 20*time.Millisecond).
		ShouldNot(BeEmpty(), "the webhook, not the 10m poll, must start a sync of %s; cairn's output:\n%s", sha, f.cairn)
	f.t.Logf("push %s (%q) took %s; cairn/sync posted on it %s after the push began",
		sha[:12], msg, pushed.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	return sha
}

// brokenPush: values the module rejects fail the instance's context with the
// module's file:line, and the cluster keeps the last good state.
func (f *forgeEnv) brokenPush(a inst) string {
	f.t.Helper()
	good := f.instance(f.ns, "a").Status.LastAppliedRevision
	sha := f.pushAndWaitStart("break a", map[string]string{"instances/a.yaml": a.yaml()})
	st := f.waitState(sha, "cairn/"+f.ns+"/a", "failure")
	f.t.Logf("broken push %s: %s = failure %q", sha[:12], st.Context, st.Description)
	f.g.Expect(st.Description).To(ContainSubstring("RenderFailed"))
	f.g.Expect(st.Description).To(MatchRegexp(renderErrorAt.String()), "the reason names the file and line")
	f.g.Expect(st.Description).To(ContainSubstring("replicas"))
	sync := f.waitState(sha, "cairn/sync", "failure")
	f.g.Expect(sync.Description).To(ContainSubstring("1 instance(s) failed"))
	f.g.Expect(f.statuses(sha)).NotTo(HaveKey("cairn/" + f.ns + "/b"))

	mi := f.instance(f.ns, "a")
	f.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good), "the last good revision stays recorded")
	f.g.Expect(isTrue(mi, "Ready")).To(BeFalse())
	f.g.Expect(f.deploymentReplicas("a")).To(Equal(int32(1)), "the last good Deployment stays")
	f.g.Expect(f.configMap(f.ns, "a-x")).NotTo(BeNil(), "nothing of a is pruned")
	return sha
}

// fixPush: the next good push turns the instance's context green on its SHA.
func (f *forgeEnv) fixPush(a inst, broken string) string {
	f.t.Helper()
	begin := time.Now()
	sha := f.pushAndWaitStart("fix a", map[string]string{"instances/a.yaml": a.yaml()})
	took := f.waitInstance("a", sha, begin, webhookSyncBound)
	st := f.waitState(sha, "cairn/"+f.ns+"/a", "success")
	f.t.Logf("fix %s: %s = success %q after %s", sha[:12], st.Context, st.Description, took.Round(time.Millisecond))
	f.waitState(sha, "cairn/sync", "success")
	f.g.Expect(f.configMap(f.ns, "a-w")).NotTo(BeNil())
	f.g.Expect(f.statuses(sha)).NotTo(HaveKey("cairn/" + f.ns + "/b"))
	f.g.Expect(f.latest(broken, "cairn/"+f.ns+"/a").State).To(Equal("failure"), "the broken commit keeps its failure")
	return sha
}

// pullRequestPlans: opening a pull request posts a plan comment with the counts and
// a cairn/plan status on its head; a push to it updates that same comment.
func (f *forgeEnv) pullRequestPlans(a inst, base string) {
	f.t.Helper()
	a.replicas, a.configs = 2, configs("x", "w", "y", "z")
	head := f.putFile("scale-a", "main", "instances/a.yaml", a.yaml())
	number, err := f.gitea.CreatePullRequest(f.ctx, f.repo, "scale-a", "main", "scale a, two more configs")
	f.g.Expect(err).NotTo(HaveOccurred())

	c := f.waitPlanComment(number, head)
	f.t.Logf("plan comment on #%d:\n%s", number, c.Body)
	f.g.Expect(c.Body).To(HavePrefix(forge.PlanMarker))
	f.g.Expect(c.Body).To(ContainSubstring("(base `" + base[:12] + "`)"))
	f.g.Expect(c.Body).To(ContainSubstring(f.planRow("a", "Update", 2, 1, 0, 2)))
	f.g.Expect(c.Body).To(ContainSubstring(f.planRow("b", "Unchanged", 0, 0, 0, 0)))
	f.g.Expect(c.Body).To(ContainSubstring("+ ConfigMap/" + f.ns + "/a-y"))
	f.g.Expect(c.Body).To(ContainSubstring("! Deployment/" + f.ns + "/a"))
	f.g.Expect(c.Body).To(MatchRegexp(`\n-\s+replicas: 1\n\+\s+replicas: 2\n`), "the rendered diff base → head")
	plan := f.waitState(head, "cairn/plan", "success")
	f.g.Expect(plan.Description).To(Equal("2 to create, 1 to configure, 0 to prune"))
	f.g.Expect(f.deploymentReplicas("a")).To(Equal(int32(1)), "a plan changes nothing in the cluster")
	f.g.Expect(f.configMap(f.ns, "a-y")).To(BeNil(), "a plan changes nothing in the cluster")

	a.configs = configs("x", "w", "y")
	head2 := f.putFile("scale-a", "", "instances/a.yaml", a.yaml())
	updated := f.waitPlanComment(number, head2)
	f.t.Logf("plan comment on #%d after a push:\n%s", number, updated.Body)
	f.g.Expect(updated.ID).To(Equal(c.ID), "the same comment is edited in place")
	f.g.Expect(f.planComments(number)).To(HaveLen(1), "never a second cairn comment")
	f.g.Expect(updated.Body).To(ContainSubstring(f.planRow("a", "Update", 1, 1, 0, 2)))
	f.g.Expect(updated.Body).NotTo(ContainSubstring("a-z"))
	plan2 := f.waitState(head2, "cairn/plan", "success")
	f.g.Expect(plan2.Description).To(Equal("1 to create, 1 to configure, 0 to prune"))
	f.waitKeptPlan(number, head2)
}

// brokenPullRequest: a pull request whose head does not render gets failure on
// cairn/plan naming the file and line.
func (f *forgeEnv) brokenPullRequest(b inst) {
	f.t.Helper()
	b.replicas = -1
	head := f.putFile("break-b", "main", "instances/b.yaml", b.yaml())
	number, err := f.gitea.CreatePullRequest(f.ctx, f.repo, "break-b", "main", "break b")
	f.g.Expect(err).NotTo(HaveOccurred())
	st := f.waitState(head, "cairn/plan", "failure")
	f.t.Logf("broken pull request #%d: cairn/plan = failure %q", number, st.Description)
	f.g.Expect(st.Description).To(ContainSubstring(f.ns + "/b"))
	f.g.Expect(st.Description).To(MatchRegexp(renderErrorAt.String()), "the failure names the file and line")
	c := f.waitPlanComment(number, head)
	f.g.Expect(c.Body).To(ContainSubstring("RenderFailed"))
	f.g.Expect(c.Body).To(MatchRegexp(renderErrorAt.String()))
	f.g.Expect(f.deploymentReplicas("b")).To(Equal(int32(2)), "a plan changes nothing in the cluster")
}

// planRow is the summary table's row of an instance.
func (f *forgeEnv) planRow(name, action string, create, configure, prune, unchanged int) string {
	return fmt.Sprintf("| `%s/%s` | %s | %d | %d | %d | %d |", f.ns, name, action, create, configure, prune, unchanged)
}

func (f *forgeEnv) deploymentReplicas(name string) int32 {
	f.t.Helper()
	var d appsv1.Deployment
	f.g.Expect(f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, &d)).To(Succeed())
	return *d.Spec.Replicas
}

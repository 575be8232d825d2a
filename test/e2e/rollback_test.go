package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// TestRollbackFromThePublishedRender: `cairn rollback --to <revision>` puts an
// instance back at an earlier render, from the artifact it was published as
// (verified under the publish Registry's key), across an object added since (pruned
// within the guards), and holds it there: a later commit that changes it is not
// applied. A render whose signature was replaced by another key's is refused and
// nothing is applied; the release applies the head again.
func TestRollbackFromThePublishedRender(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.freeSyncLease() // no controller runs: the next sync applies the rollback
	web := inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a")}
	pub, repo := publishingRepo(e, web)
	first := repo.commit("web: a", nil)
	e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	firstDigest := e.instance(e.ns, "web").Status.RenderDigest
	web.configs = configs("a", "b")
	second := repo.commit("web: a and b", map[string]string{"instances/web.yaml": web.yaml()})
	e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	e.g.Expect(e.configMap(e.ns, "web-b")).NotTo(BeNil())
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}

	out := e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", first[:10]}, kube...)...)
	e.g.Expect(out).To(ContainSubstring("rollback to " + firstDigest))
	res := e.sync(repo)
	got := result(res, e.ns, "web")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", got)
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "the object added since is pruned")
	e.g.Expect(e.configMap(e.ns, "web-a")).NotTo(BeNil())
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi.Status.Held).NotTo(BeNil())
	e.g.Expect(mi.Status.Held.RenderDigest).To(Equal(firstDigest))
	e.g.Expect(conditions.GetReason(mi, cairnv1.HeldCondition)).To(Equal(cairnv1.ReasonRolledBack))
	e.g.Expect(mi.Status.History[0].RenderDigest).To(Equal(firstDigest))

	web.configs = configs("a", "b", "c")
	repo.commit("web: a, b and c", map[string]string{"instances/web.yaml": web.yaml()})
	got = result(e.sync(repo), e.ns, "web")
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonHeld), "%+v", got)
	e.g.Expect(e.configMap(e.ns, "web-c")).To(BeNil(), "held where it was put back")

	// Drift is corrected to the render it is held at, not to the head's.
	e.expectHeldDriftCorrected(repo, "web-c")

	// The second render's signature replaced by another key's: refused, nothing applied.
	var secondEntry *cairnv1.HistoryEntry
	for i, h := range mi.Status.History {
		if h.Revision == second {
			secondEntry = &mi.Status.History[i]
		}
	}
	e.g.Expect(secondEntry).NotTo(BeNil())
	e.g.Expect(secondEntry.Published).NotTo(BeNil())
	rc := registryClient(t, pub, true)
	repoPath := "rendered/cluster/" + e.ns + "/web"
	sigTag := strings.Replace(secondEntry.Published.Digest, ":", "-", 1) + ".sig"
	sig, err := rc.Resolve(e.ctx, repoPath, sigTag)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(rc.Delete(e.ctx, repoPath, sig.Digest)).To(Succeed())
	e.g.Expect(rc.Sign(e.ctx, repoPath, digestOf(secondEntry.Published.Digest), newKeyPair(t).key)).To(Succeed())
	e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", secondEntry.RenderDigest}, kube...)...)
	got = result(e.sync(repo), e.ns, "web")
	e.g.Expect(got.Action).To(Equal(outcome.ActionFailed), "%+v", got)
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonSignatureInvalid), got.Message)
	e.g.Expect(got.Message).To(ContainSubstring("does not verify"))
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "nothing applied")

	e.runCairn(bin, append([]string{"release", e.ns + "/web"}, kube...)...)
	got = result(e.sync(repo), e.ns, "web")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", got)
	e.g.Expect(e.configMap(e.ns, "web-c")).NotTo(BeNil(), "released: the head applies")
}

// TestRollbackUnderTheControllerWithGitDown: under `cairn controller`, with the
// Git server gone, `cairn rollback` waits until the controller has put the
// instance back at its first render from the published artifact (the object added
// since pruned) and holds it; the time it took is logged beside that of a normal
// sync of the same change (a revert commit, polled every second), same run.
func TestRollbackUnderTheControllerWithGitDown(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	web := inst{name: "web", ns: e.ns, replicas: 0, configs: configs("a")}
	_, repo := publishingRepo(e, web)
	first := repo.commit("web: a", nil)
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, e.controllerArgs(t, repo, freeLoopbackAddr(t), "0")...)
	applied := func(rev string) func() bool {
		return func() bool { mi := e.instance(e.ns, "web"); return mi != nil && mi.Status.LastAppliedRevision == rev }
	}
	e.g.Eventually(applied(first), time.Minute, 100*time.Millisecond).Should(BeTrue(), ctrl.String)
	web.configs = configs("a", "b")
	second := repo.commit("web: a and b", map[string]string{"instances/web.yaml": web.yaml()})
	e.g.Eventually(applied(second), time.Minute, 100*time.Millisecond).Should(BeTrue(), ctrl.String)
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}

	away := repo.dir + ".down"
	e.g.Expect(os.Rename(repo.dir, away)).To(Succeed()) // the Git server is gone
	began := time.Now()
	out := e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", first}, kube...)...)
	rollback := time.Since(began)
	e.g.Expect(out).To(ContainSubstring("held at "), ctrl.String())
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "rolled back with Git down")
	e.g.Expect(conditions.GetReason(e.instance(e.ns, "web"), cairnv1.HeldCondition)).To(Equal(cairnv1.ReasonRolledBack))

	e.g.Expect(os.Rename(away, repo.dir)).To(Succeed())
	e.runCairn(bin, append([]string{"release", e.ns + "/web"}, kube...)...)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "web-b") != nil }, time.Minute, 100*time.Millisecond).Should(BeTrue(), ctrl.String)
	web.configs = configs("a")
	began = time.Now()
	repo.commit("revert: web: a", map[string]string{"instances/web.yaml": web.yaml()})
	e.g.Eventually(func() bool { return e.configMap(e.ns, "web-b") == nil }, time.Minute, 20*time.Millisecond).Should(BeTrue(), ctrl.String)
	t.Logf("cairn rollback to Ready (Git down): %s; the same change as a revert commit, polled every 1s: %s",
		rollback.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// publishingRepo readies e for rollbacks: cairn's namespace, a publish registry
// with basic auth and a signing key, and a repository whose Platform publishes
// every render there, with the instance web.
func publishingRepo(e *env, web inst) (*testRegistry, *gitRepo) {
	pub := startRegistry(e.t, true, false)
	keys := newKeyPair(e.t)
	e.ensureCairnNamespace()
	e.putCairnSecret("pub-creds-"+e.ns, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	files := appRepo("  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n", web)
	files["registries.yaml"] = registryYAML("rendered", pub.Host, true,
		"  secretRef: {name: pub-creds-"+e.ns+"}\n  signing:\n    keySecretRef: {name: signing-"+e.ns+"}\n")
	return pub, newGitRepo(e.t, files)
}

// TestRollbackByRenderingTheRevisionAgain: without render.publish, a rollback
// renders the instance again as it was declared at that revision (read from Git),
// applies it only when it renders to the digest the history recorded, prunes what
// was added since, and holds it there; with no way to read revisions the rollback
// fails NotAvailable and nothing is applied. Held there, its drift is corrected to
// that render, rendered again.
func TestRollbackByRenderingTheRevisionAgain(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.ensureCairnNamespace()
	e.freeSyncLease()
	web := inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a")}
	repo := newGitRepo(t, appRepo("", web))
	first := repo.commit("web: a", nil)
	e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	firstDigest := e.instance(e.ns, "web").Status.RenderDigest
	web.configs = configs("a", "b")
	repo.commit("web: a and b", map[string]string{"instances/web.yaml": web.yaml()})
	e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}

	e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", first}, kube...)...)
	got := result(e.sync(repo), e.ns, "web")
	e.g.Expect(got.Reason).To(Equal(declarations.ReasonNotAvailable), "this engine reads no revision: %+v", got)
	e.g.Expect(e.configMap(e.ns, "web-b")).NotTo(BeNil(), "nothing applied")

	e.withEngine(render.RendererOptions{}, func(o *reconciler.Options) {
		o.Revisions = func(ctx context.Context, sha string) (reconciler.Revision, error) {
			src, err := gitsource.New(gitsource.Options{URL: repo.url(), CacheDir: filepath.Join(e.cache, "git")})
			if err != nil {
				return reconciler.Revision{}, err
			}
			return reconciler.ReadRevision(ctx, src, sha, "")
		}
	})
	repo.commit("retry", nil) // a new revision: the failed rollback is tried again at once
	got = result(e.sync(repo), e.ns, "web")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", got)
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "rendered again at %s and applied: what came since is pruned", first[:12])
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi.Status.RenderDigest).To(Equal(firstDigest), "the same render, to the digest")
	e.g.Expect(conditions.GetReason(mi, cairnv1.HeldCondition)).To(Equal(cairnv1.ReasonRolledBack))

	// Its drift is corrected to the render it is held at, rendered again at its revision.
	e.expectHeldDriftCorrected(repo, "web-b")
}

// expectHeldDriftCorrected edits web's ConfigMap web-a by hand, checks drift at
// repo's head, and expects web-a back as web is held, and notInHeld (a ConfigMap of
// the head's render only) still absent.
func (e *env) expectHeldDriftCorrected(repo *gitRepo, notInHeld string) {
	e.t.Helper()
	cm := e.configMap(e.ns, "web-a")
	want := cm.Data["value"]
	cm.Data = map[string]string{"value": "edited by hand"}
	e.g.Expect(e.c.Update(e.ctx, cm)).To(Succeed())
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(reports).To(ContainElement(And(HaveField("Name", "web"), HaveField("Corrected", BeNumerically(">", 0)))), "%+v", reports)
	e.g.Expect(e.configMap(e.ns, "web-a").Data).To(HaveKeyWithValue("value", want), "corrected to the held render")
	e.g.Expect(e.configMap(e.ns, notInHeld)).To(BeNil(), "to the held render, not the head's")
}

// TestARollbackDoesNotTakeAnotherInstancesObject: web's first render held a
// ConfigMap that left its render, and that another instance, thief, renders now; a
// rollback of web to that render fails with the ownership error, writes nothing,
// and thief's ConfigMap keeps its value and owner.
func TestARollbackDoesNotTakeAnotherInstancesObject(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.ensureCairnNamespace()
	e.freeSyncLease()
	repo := newGitRepo(t, rawRepo(permissive, map[string]string{
		"web": rawInstance("web", e.ns, "", configMapObj("", "shared", "web's")),
	}))
	first := repo.commit("web renders shared", nil)
	e.syncClean(repo)
	repo.commit("web lets shared go, thief takes it", map[string]string{
		"instances/web.yaml":   rawInstance("web", e.ns, "", configMapObj("", "web-own", "web's")),
		"instances/thief.yaml": rawInstance("thief", e.ns, "", configMapObj("", "shared", "thief's")),
	})
	e.syncClean(repo)
	e.g.Expect(ownerOf(e.get("v1", "ConfigMap", e.ns, "shared"))).To(Equal(e.ns + ".thief"))
	e.withEngine(render.RendererOptions{}, func(o *reconciler.Options) {
		o.Revisions = func(ctx context.Context, sha string) (reconciler.Revision, error) {
			src, err := gitsource.New(gitsource.Options{URL: repo.url(), CacheDir: filepath.Join(e.cache, "git")})
			if err != nil {
				return reconciler.Revision{}, err
			}
			return reconciler.ReadRevision(ctx, src, sha, "")
		}
	})

	e.runCairn(bin, "rollback", e.ns+"/web", "--to", first, "--kubeconfig", e.cluster.Kubeconfig)
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{ns: e.ns, name: "web", reason: cairnv1.ReasonOwnershipConflict,
		contains: []string{"ConfigMap/" + e.ns + "/shared is owned by instance " + e.ns + "/thief"}})
	shared := e.configMap(e.ns, "shared")
	e.g.Expect(shared.Data).To(HaveKeyWithValue("value", "thief's"))
	e.g.Expect(ownerOf(e.get("v1", "ConfigMap", e.ns, "shared"))).To(Equal(e.ns + ".thief"))
	e.g.Expect(e.configMap(e.ns, "web-own")).NotTo(BeNil(), "nothing of web's pruned by the failed rollback")
}

// TestRollbackAtOnceWithoutAController: where no controller runs, `cairn rollback
// --repo` applies the rollback itself, holding the sync Lease, at the revision the
// cluster last synced, read from the local Git cache with the Git server gone; the
// render comes from its published artifact. It prints the instance Ready and held,
// across a module version change and an object added since (pruned), and another
// instance is left as it was.
func TestRollbackAtOnceWithoutAController(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.freeSyncLease()
	web := inst{name: "web", ns: e.ns, replicas: 0, configs: configs("a")}
	other := inst{name: "other", ns: e.ns, replicas: 0, configs: configs("o")}
	_, repo := publishingRepo(e, web)
	repo.commit("other", map[string]string{"instances/other.yaml": other.yaml()})
	first := repo.commit("web: a", nil)
	cache := t.TempDir()
	flags := []string{"--kubeconfig", e.cluster.Kubeconfig, "--repo", repo.url(), "--cache-dir", cache}
	e.runCairn(bin, append([]string{"sync", "--once", "-q"}, flags...)...)
	// The next version of its module (labels its Deployment), and an object more.
	web.configs = configs("a", "b")
	v2 := strings.Replace(appModule, "metadata: name: instance.name", `metadata: {name: instance.name, labels: version: "v2"}`, 1)
	repo.commit("web: module v2, a and b", map[string]string{
		"modules/app-v2/app.cue": v2, "modules/app-v2/cue.mod/module.cue": appModuleFile,
		"instances/web.yaml": strings.Replace(web.yaml(), "./modules/app", "./modules/app-v2", 1)})
	e.runCairn(bin, append([]string{"sync", "--once", "-q"}, flags...)...)
	e.g.Expect(e.configMap(e.ns, "web-b")).NotTo(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "web").GetLabels()).To(HaveKeyWithValue("version", "v2"))
	otherBefore := e.instance(e.ns, "other").Status.LastAttemptedInput

	away := repo.dir + ".down"
	e.g.Expect(os.Rename(repo.dir, away)).To(Succeed()) // the Git server is gone
	defer os.Rename(away, repo.dir)
	out := e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", first[:10]}, flags...)...)
	e.g.Expect(out).To(ContainSubstring("held at "))
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "applied at once: the object added since is pruned")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "web").GetLabels()).NotTo(HaveKey("version"), "back at the module's first version")
	e.g.Expect(e.configMap(e.ns, "web-a")).NotTo(BeNil())
	mi := e.instance(e.ns, "web")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue(), conditions.GetMessage(mi, "Ready"))
	e.g.Expect(conditions.GetReason(mi, cairnv1.HeldCondition)).To(Equal(cairnv1.ReasonRolledBack))
	e.g.Expect(e.instance(e.ns, "other").Status.LastAttemptedInput).To(Equal(otherBefore), "another instance left alone")

	// Without the repository flags, the rollback is only asked.
	e.g.Expect(os.Rename(away, repo.dir)).To(Succeed())
	out = e.runCairn(bin, "rollback", e.ns+"/web", "--to", first[:10], "--kubeconfig", e.cluster.Kubeconfig)
	e.g.Expect(out).To(ContainSubstring("the next `cairn sync` applies it"))
}

// TestRollbackOpensAPullRequest: `cairn rollback --open-pr` against a real Gitea,
// where no controller runs: the instance is rendered again at the revision (no
// render.publish) and applied at once, then a pull request puts its declaration
// back as it was there. Merged, Git declares what the cluster runs: the release
// that follows changes nothing.
func TestRollbackOpensAPullRequest(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.ensureCairnNamespace()
	e.freeSyncLease()
	web := inst{name: "web", ns: e.ns, replicas: 0, configs: configs("a")}
	first := web.yaml()
	f, firstSHA := newForgeEnv(t, e, appRepo("", web))
	tokenFile := filepath.Join(t.TempDir(), "token")
	e.g.Expect(os.WriteFile(tokenFile, []byte(f.gitea.Token+"\n"), 0o600)).To(Succeed())
	flags := []string{"--kubeconfig", e.cluster.Kubeconfig, "--repo", f.gitURL(), "--cache-dir", t.TempDir()}
	e.runCairn(bin, append([]string{"sync", "--once", "-q"}, flags...)...)
	web.configs = configs("a", "b")
	f.push("web: a and b", map[string]string{"instances/web.yaml": web.yaml()})
	e.runCairn(bin, append([]string{"sync", "--once", "-q"}, flags...)...)
	e.g.Expect(e.configMap(e.ns, "web-b")).NotTo(BeNil())

	out := e.runCairn(bin, append([]string{"rollback", e.ns + "/web", "--to", firstSHA, "--open-pr",
		"--forge", "gitea", "--forge-url", f.gitea.URL, "--forge-token-file", tokenFile}, flags...)...)
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "rolled back at once")
	m := regexp.MustCompile(`opened pull request #(\d+)`).FindStringSubmatch(out)
	e.g.Expect(m).NotTo(BeNil(), out)
	number, _ := strconv.Atoi(m[1])
	pr, err := f.gitea.PullRequestOf(e.ctx, f.repo, number)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(pr.Title).To(Equal("Roll back " + e.ns + "/web to " + firstSHA[:12]))
	e.g.Expect(pr.Body).To(ContainSubstring("held at "))
	e.g.Expect(pr.Body).To(ContainSubstring("`instances/web.yaml`: reverted"))
	e.g.Expect(pr.Body).NotTo(ContainSubstring(f.gitea.Token))
	content, ok, err := f.gitea.FileAt(e.ctx, f.repo, pr.Head.Ref, "instances/web.yaml")
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(ok).To(BeTrue())
	e.g.Expect(content).To(Equal(first), "the declaration as it was at the revision rolled back to")
	e.g.Expect(out).NotTo(ContainSubstring(f.gitea.Token))

	held := e.instance(e.ns, "web").Status.RenderDigest
	e.g.Expect(f.gitea.MergePullRequest(e.ctx, f.repo, number)).To(Succeed())
	e.runCairn(bin, "release", e.ns+"/web", "--kubeconfig", e.cluster.Kubeconfig)
	e.runCairn(bin, append([]string{"sync", "--once", "-q"}, flags...)...)
	mi := e.instance(e.ns, "web")
	e.g.Expect(mi.Status.Held).To(BeNil())
	e.g.Expect(mi.Status.RenderDigest).To(Equal(held), "merged: Git declares what the cluster runs")
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil())
}

// TestRequestsWakeASyncLoop: under a `cairn sync --interval 10m` loop (so only a
// request can explain a sync within the test), `cairn hold`, `cairn rollback` and
// `cairn release` each return once the loop has acted on them: the loop watches
// the instances' request annotations as the controller does.
func TestRequestsWakeASyncLoop(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.ensureCairnNamespace()
	e.freeSyncLease()
	web := inst{name: "web", ns: e.ns, replicas: 0, configs: configs("a")}
	_, repo := publishingRepo(e, web)
	first := repo.commit("web: a", nil)
	kube := []string{"--kubeconfig", e.cluster.Kubeconfig}
	loop := startCairnProcess(t, bin, append([]string{"sync", "--repo", repo.url(), "--interval", "10m", "--drift-interval", "0",
		"--cache-dir", t.TempDir()}, kube...)...)
	applied := func() string {
		if mi := e.instance(e.ns, "web"); mi != nil && conditions.IsTrue(mi, "Ready") {
			return mi.Status.LastAppliedRevision
		}
		return ""
	}
	e.g.Eventually(applied, time.Minute, 100*time.Millisecond).Should(Equal(first), loop.String)
	web.configs = configs("a", "b")
	second := repo.commit("web: a and b", map[string]string{"instances/web.yaml": web.yaml()})
	e.runCairn(bin, append([]string{"reconcile", e.ns + "/web"}, kube...)...) // a new commit, with no poll for 10 minutes
	e.g.Eventually(applied, time.Minute, 100*time.Millisecond).Should(Equal(second), loop.String)

	wait := []string{"--timeout", "30s"}
	out := e.runCairn(bin, append(append([]string{"hold", e.ns + "/web"}, wait...), kube...)...)
	e.g.Expect(out).To(ContainSubstring("held at "), loop.String())
	out = e.runCairn(bin, append(append([]string{"rollback", e.ns + "/web", "--to", first}, wait...), kube...)...)
	e.g.Expect(out).To(ContainSubstring("held at "), loop.String())
	e.g.Expect(e.configMap(e.ns, "web-b")).To(BeNil(), "rolled back by the loop")
	out = e.runCairn(bin, append(append([]string{"release", e.ns + "/web"}, wait...), kube...)...)
	e.g.Expect(out).To(ContainSubstring("released"), loop.String())
	e.g.Eventually(func() bool { return e.configMap(e.ns, "web-b") != nil }, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), loop.String)
}

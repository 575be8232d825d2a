package e2e

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Prune guards per tenant: each tenant's deletions count against its own caps, and a
// cairn-allow-prune trailer speaks only for the instances whose files its commit
// changes. Each test checks the victim's state afterwards.

// expectTenantReady checks that instance name of ns synced: its CR reads Ready.
func (e *env) expectTenantReady(ns, name string) {
	e.t.Helper()
	mi := e.instance(ns, name)
	e.g.Expect(mi).NotTo(BeNil(), "%s/%s", ns, name)
	e.g.Expect(isTrue(mi, "Ready")).To(BeTrue(), "%s/%s reads Ready: %+v", ns, name, mi.Status.Conditions)
}

// expectPruneRefused checks that instance name of ns failed on a prune guard with
// message parts, keeps the ConfigMaps of keys and reads Ready=False, Stalled.
func (e *env) expectPruneRefused(ns, name string, keys []string, parts ...string) {
	e.t.Helper()
	mi := e.instance(ns, name)
	e.g.Expect(mi).NotTo(BeNil(), "%s/%s is not removed", ns, name)
	e.g.Expect(isTrue(mi, "Ready")).To(BeFalse())
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	for _, p := range parts {
		e.g.Expect(mi.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(p))), "%s/%s", ns, name)
	}
	e.g.Expect(e.gone("apps/v1", "Deployment", ns, name)).To(BeFalse(), "Deployment %s/%s was deleted", ns, name)
	for _, k := range keys {
		e.g.Expect(e.configMap(ns, name+"-"+k)).NotTo(BeNil(), "ConfigMap %s/%s-%s was deleted", ns, name, k)
	}
}

// TestPruneCapCountsEachTenantApart: team-a's instance would delete 4 objects, over
// maxDeletions 3; in the same commit team-b's instance prunes one. team-a's prune is
// refused and deletes nothing; team-b's goes ahead, in that commit and in a later one
// that touches only team-b's file (team-a's failed instance is retried on it).
func TestPruneCapCountsEachTenantApart(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "v", "w", "x", "y", "z"), tenantInst("b", e.ns+"-b", "x", "y", "z")
	e.grantNamespace(e.ns+"-a", "*")
	e.grantNamespace(e.ns+"-b", "*")
	files := appRepo("  prune:\n    maxDeletions: 3\n" + tenantsPlatform(e.ns))
	files["tenants/a/a.yaml"], files["tenants/b/b.yaml"] = a.yaml(), b.yaml()
	repo := newGitRepo(t, files)
	e.syncClean(repo)

	a.configs, b.configs = configs("v"), configs("x", "y")
	repo.commit("team-a drops four, team-b one", map[string]string{"tenants/a/a.yaml": a.yaml(), "tenants/b/b.yaml": b.yaml()})
	res := e.sync(repo)
	ra := result(res, a.ns, "a")
	e.g.Expect(ra.Action).To(BeEquivalentTo("Failed"), "%+v", ra)
	e.g.Expect(ra.Reason).To(Equal(cairnv1.ReasonPruneGuard))
	e.g.Expect(ra.Message).To(ContainSubstring("tenant team-a's instances would delete 4 objects in this sync, over its cap of 3"))
	rb := result(res, b.ns, "b")
	e.g.Expect(rb.Ready).To(BeTrue(), "the victim prunes: %+v", rb)
	e.g.Expect(rb.Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "ConfigMap", b.ns, "b-z")).To(BeTrue())
	e.expectTenantReady(b.ns, "b")
	e.expectPruneRefused(a.ns, "a", []string{"v", "w", "x", "y", "z"}, "tenant team-a's instances would delete 4 objects")

	b.configs = configs("x")
	repo.commit("team-b drops y", map[string]string{"tenants/b/b.yaml": b.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, a.ns, "a").Reason).To(Equal(cairnv1.ReasonPruneGuard), "team-a's instance was retried and refused again")
	rb = result(res, b.ns, "b")
	e.g.Expect(rb.Ready).To(BeTrue(), "%+v", rb)
	e.g.Expect(rb.Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "ConfigMap", b.ns, "b-y")).To(BeTrue())
	e.g.Expect(e.configMap(b.ns, "b-x")).NotTo(BeNil())
	e.expectTenantReady(b.ns, "b")
	e.expectPruneRefused(a.ns, "a", []string{"v", "w", "x", "y", "z"}, "over its cap of 3")
}

// TestRemovalGuardCountsEachTenantApart: team-a deletes the file of three of its four
// instances, over the half-of-instances rule for team-a; in the same commit team-b
// removes one of its three. team-a's removals are refused, team-b's goes ahead.
func TestRemovalGuardCountsEachTenantApart(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	var many []string
	for _, name := range []string{"a1", "a2", "a3"} {
		many = append(many, tenantInst(name, a.ns, "x").yaml())
	}
	repo := e.tenantRepo(a, b, map[string]string{
		"tenants/a/many.yaml": strings.Join(many, "---\n"),
		"tenants/b/b2.yaml":   tenantInst("b2", b.ns, "x").yaml(), "tenants/b/b3.yaml": tenantInst("b3", b.ns, "x").yaml(),
	})
	e.syncClean(repo)

	repo.commit("team-a drops many, team-b drops b2", map[string]string{"tenants/a/many.yaml": "", "tenants/b/b2.yaml": ""})
	res := e.sync(repo)
	for _, name := range []string{"a1", "a2", "a3"} {
		r := result(res, a.ns, name)
		e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", r)
		e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneGuard))
		e.expectPruneRefused(a.ns, name, []string{"x"}, "this commit removes 3 of tenant team-a's 4 instances, more than half")
	}
	r := result(res, b.ns, "b2")
	e.g.Expect(r.Action).To(BeEquivalentTo("Deleted"), "the victim's removal goes ahead: %+v", r)
	e.g.Expect(e.instance(b.ns, "b2")).To(BeNil())
	e.g.Expect(e.gone("apps/v1", "Deployment", b.ns, "b2")).To(BeTrue())
	e.g.Expect(e.gone("v1", "ConfigMap", b.ns, "b2-x")).To(BeTrue())
	for _, name := range []string{"b", "b3"} {
		e.expectTenantReady(b.ns, name)
	}
	e.expectTenantReady(a.ns, "a")
}

// TestAllowPruneTrailerSpeaksOnlyForItsCommitsFiles: team-a's prune is refused over
// maxPercent. A commit that changes only team-b's file and carries the trailer does
// not lift team-a's guard; one that changes team-a's file does.
func TestAllowPruneTrailerSpeaksOnlyForItsCommitsFiles(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "w", "x", "y"), tenantInst("b", e.ns+"-b", "x")
	e.grantNamespace(e.ns+"-a", "*")
	e.grantNamespace(e.ns+"-b", "*")
	files := appRepo("  prune:\n    maxPercent: 50\n" + tenantsPlatform(e.ns))
	files["tenants/a/a.yaml"], files["tenants/b/b.yaml"] = a.yaml(), b.yaml()
	repo := newGitRepo(t, files)
	e.syncClean(repo)

	a.configs = map[string]string{}
	repo.commit("team-a drops all configs", map[string]string{"tenants/a/a.yaml": a.yaml()})
	r := result(e.sync(repo), a.ns, "a")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonPruneGuard), "%+v", r)
	e.g.Expect(r.Message).To(And(ContainSubstring("3 of its 4 objects"), ContainSubstring("maxPercent 50"),
		ContainSubstring(`add the trailer "cairn-allow-prune: <n>" to a commit that changes the instance's file`)))

	b.configs = configs("x", "y")
	repo.commit("team-b adds y\n\ncairn-allow-prune: 3", map[string]string{"tenants/b/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.g.Expect(result(res, a.ns, "a").Reason).To(Equal(cairnv1.ReasonPruneGuard), "another tenant's trailer lifts nothing: %+v", result(res, a.ns, "a"))
	e.g.Expect(result(res, b.ns, "b").Ready).To(BeTrue(), "%+v", result(res, b.ns, "b"))
	e.expectPruneRefused(a.ns, "a", []string{"w", "x", "y"}, "over prune.maxPercent 50%")
	e.expectTenantReady(b.ns, "b")
	e.g.Expect(e.configMap(b.ns, "b-y")).NotTo(BeNil())

	repo.commit("team-a drops all configs, on purpose\n\ncairn-allow-prune: 3", map[string]string{"tenants/a/a.yaml": a.yaml() + "# on purpose\n"})
	res = e.sync(repo)
	r = result(res, a.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", r)
	e.g.Expect(r.Pruned).To(Equal(3))
	for _, k := range []string{"w", "x", "y"} {
		e.g.Expect(e.gone("v1", "ConfigMap", a.ns, fmt.Sprintf("a-%s", k))).To(BeTrue(), k)
	}
	e.expectTenantReady(a.ns, "a")
	e.expectTenantReady(b.ns, "b")
}

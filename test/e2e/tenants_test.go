package e2e

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render/declarations"
)

// Attacks by a tenant that may write only under its own directory of the repository
// (tenants/a/): each checks the other tenant's (the victim's) state afterwards.

// tenantsPlatform declares team-a (tenants/a/**, namespace <ns>-a) and team-b
// (tenants/b/**, namespace <ns>-b), both applying as deployer.
func tenantsPlatform(ns string) string {
	return fmt.Sprintf(`  tenants:
    - name: team-a
      paths: ["tenants/a/**"]
      namespaces: [%[1]s-a]
      serviceAccount: deployer
    - name: team-b
      paths: ["tenants/b/**"]
      namespaces: [%[1]s-b]
      serviceAccount: deployer
`, ns)
}

// tenantInst is an app instance of a tenant, applying as the tenant's ServiceAccount.
func tenantInst(name, ns string, keys ...string) inst {
	return inst{name: name, ns: ns, replicas: 0, configs: configs(keys...), extra: "  serviceAccountName: deployer\n"}
}

// tenantRepo grants deployer the namespaces of both tenants and returns a repository
// with the tenants' Platform, instance a of team-a and instance b of team-b.
func (e *env) tenantRepo(a, b inst, extra map[string]string) *gitRepo {
	e.t.Helper()
	e.grantNamespace(e.ns+"-a", "*")
	e.grantNamespace(e.ns+"-b", "*")
	files := appRepo(tenantsPlatform(e.ns))
	files["tenants/a/"+a.name+".yaml"] = a.yaml()
	files["tenants/b/"+b.name+".yaml"] = b.yaml()
	for name, data := range extra {
		files[name] = data
	}
	return newGitRepo(e.t, files)
}

// failureNaming returns the failed result whose message holds every part.
func failureNaming(res *reconciler.SyncResult, parts ...string) *reconciler.InstanceResult {
	for i, r := range res.Instances {
		matches := r.Action == "Failed"
		for _, p := range parts {
			matches = matches && strings.Contains(r.Message, p)
		}
		if matches {
			return &res.Instances[i]
		}
	}
	return nil
}

// expectVictimUntouched checks that team-b's instance b is Ready and that its
// ConfigMap is the very object it was (same UID and resourceVersion).
func (e *env) expectVictimUntouched(ns, uid, version string) {
	e.t.Helper()
	mi := e.instance(ns, "b")
	e.g.Expect(mi).NotTo(BeNil())
	e.g.Expect(isTrue(mi, "Ready")).To(BeTrue(), "the victim reads Ready")
	cm := e.configMap(ns, "b-x")
	e.g.Expect(cm).NotTo(BeNil())
	e.g.Expect(string(cm.UID)).To(Equal(uid))
	e.g.Expect(cm.ResourceVersion).To(Equal(version), "the victim's object was not written")
	e.g.Expect(cm.Labels[cairnv1.InstanceLabel]).To(Equal(cairnv1.InstanceKey(ns, "b")))
}

// TestTenantCannotDeclareIntoAnotherTenantsNamespace: team-a declares, in its own
// directory, team-b's instance (to take it over) and a new instance in team-b's
// namespace. Both are refused with the rule, file and line; team-b's instance and its
// objects are untouched, and team-b's next commit still syncs.
func TestTenantCannotDeclareIntoAnotherTenantsNamespace(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	repo := e.tenantRepo(a, b, nil)
	e.syncClean(repo)
	e.g.Expect(e.instance(b.ns, "b").Annotations["cairn.dev/source"]).To(Equal("tenants/b/b.yaml"))
	cm := e.configMap(b.ns, "b-x")

	grab := tenantInst("b", b.ns, "x", "owned")
	grab.replicas = 3
	intruder := tenantInst("intruder", b.ns, "x")
	repo.commit("team-a grabs team-b", map[string]string{"tenants/a/grab.yaml": grab.yaml() + "---\n" + intruder.yaml()})
	res := e.sync(repo)

	e.g.Expect(res.Error).NotTo(HaveOccurred())
	rule := fmt.Sprintf(`tenant team-a: namespace %q is not one of [%s]`, b.ns, a.ns)
	for _, at := range []string{"tenants/a/grab.yaml:5", fmt.Sprintf("tenants/a/grab.yaml:%d", 5+strings.Count(grab.yaml(), "\n")+1)} {
		f := failureNaming(res, at, "metadata.namespace", rule)
		e.g.Expect(f).NotTo(BeNil(), "no failure names %s: %+v", at, res.Instances)
		e.g.Expect(f.Reason).To(Equal(cairnv1.ReasonNamespaceDenied))
	}
	e.g.Expect(result(res, b.ns, "b").Action).NotTo(BeEquivalentTo("Failed"), "the victim is not failed by another's declaration")
	e.expectVictimUntouched(b.ns, string(cm.UID), cm.ResourceVersion)
	e.g.Expect(e.configMap(b.ns, "b-owned")).To(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", b.ns, "b").Object["spec"].(map[string]any)["replicas"]).To(BeEquivalentTo(0))
	e.g.Expect(e.instance(b.ns, "intruder")).To(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", b.ns, "intruder")).To(BeNil())

	b.configs = configs("x", "y")
	repo.commit("team-b changes", map[string]string{"tenants/b/b.yaml": b.yaml()})
	e.g.Expect(result(e.sync(repo), b.ns, "b").Ready).To(BeTrue())
	e.g.Expect(e.configMap(b.ns, "b-y")).NotTo(BeNil())
}

// TestTenantCannotSmuggleAPlatform: team-a adds a Platform of its own (no tenants, every
// namespace allowed) under its directory. It is refused; the Platform CR keeps its
// spec and team-b's commit in the same revision syncs.
func TestTenantCannotSmuggleAPlatform(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	repo := e.tenantRepo(a, b, nil)
	e.syncClean(repo)
	before := e.platformCR().Spec

	smuggled := "# team-a's own rules\n" + platformYAML("  verify: {mode: Off}\n")
	b.configs = configs("x", "y")
	repo.commit("team-a smuggles a Platform", map[string]string{"tenants/a/platform.yaml": smuggled, "tenants/b/b.yaml": b.yaml()})
	res := e.sync(repo)

	e.g.Expect(res.Error).NotTo(HaveOccurred())
	f := failureNaming(res, "tenants/a/platform.yaml:2", `tenant team-a: a Platform may not be declared under the tenant's paths ["tenants/a/**"]`)
	e.g.Expect(f).NotTo(BeNil(), "%+v", res.Instances)
	e.g.Expect(f.Reason).To(Equal(declarations.ReasonTenantViolation))
	p := e.platformCR()
	e.g.Expect(p.Spec).To(Equal(before), "the Platform CR keeps its spec")
	e.g.Expect(p.Spec.Tenants).To(HaveLen(2))
	e.g.Expect(p.Spec.Verify.Mode).NotTo(Equal(cairnv1.VerifyOff))
	e.g.Expect(result(res, b.ns, "b").Ready).To(BeTrue(), "%+v", result(res, b.ns, "b"))
	e.g.Expect(e.configMap(b.ns, "b-y")).NotTo(BeNil(), "the other instances sync")
	e.g.Expect(isTrue(e.instance(a.ns, "a"), "Ready")).To(BeTrue())
}

// TestTenantJunkFilesFailOnlyTheirOwnInstances: team-a replaces the file of its
// instance a with 10,001 documents, and that of its instance big with a 50 MB blob; in
// the same commit the platform team deletes instance gone (one of its two: the
// half-of-instances rule counts its own instances) and team-b changes b. a and big read
// failed and keep their objects, gone is removed, b syncs.
func TestTenantJunkFilesFailOnlyTheirOwnInstances(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	big := tenantInst("big", e.ns+"-a", "x")
	gone := inst{name: "gone", ns: e.ns, replicas: 0, configs: configs("x")}
	stays := inst{name: "stays", ns: e.ns, replicas: 0}
	repo := e.tenantRepo(a, b, map[string]string{"tenants/a/big.yaml": big.yaml(), "instances/gone.yaml": gone.yaml(),
		"instances/stays.yaml": stays.yaml()})
	good := e.syncClean(repo)
	uidA, uidBig := e.configMap(a.ns, "a-x").UID, e.configMap(big.ns, "big-x").UID

	junk := strings.Repeat("---\njunk: true\n", 10_001)
	blob := "# " + strings.Repeat("x", 50<<20) + "\n"
	b.configs = configs("x", "y")
	repo.commit("junk, a deletion and a change", map[string]string{
		"tenants/a/a.yaml": junk, "tenants/a/big.yaml": blob, "instances/gone.yaml": "", "tenants/b/b.yaml": b.yaml(),
	})
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(planOf(plan, e.ns, "gone").Action).To(BeEquivalentTo("Delete"))
	e.g.Expect(planOf(plan, e.ns, "gone").PruneVerdict).To(Equal("allowed"), "the plan says what the sync does")
	for _, name := range []string{"a", "big"} {
		ip := planOf(plan, a.ns, name)
		e.g.Expect(ip.Action).To(BeEquivalentTo("Error"), "%+v", ip)
		e.g.Expect(ip.Error).To(And(ContainSubstring("declared in tenants/a/"), ContainSubstring("not removing it")))
		e.g.Expect(ip.PruneVerdict).To(HavePrefix("refused"))
	}
	res := e.sync(repo)

	e.g.Expect(res.Error).NotTo(HaveOccurred())
	e.g.Expect(result(res, b.ns, "b").Ready).To(BeTrue(), "%+v", result(res, b.ns, "b"))
	e.g.Expect(e.configMap(b.ns, "b-y")).NotTo(BeNil(), "the other tenant's commit is applied")
	e.g.Expect(result(res, e.ns, "gone").Action).To(BeEquivalentTo("Deleted"), "%+v", result(res, e.ns, "gone"))
	e.g.Expect(e.instance(e.ns, "gone")).To(BeNil())
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "gone")).To(BeTrue(), "a file deleted in the same commit is a removal")

	for _, tc := range []struct{ name, ns, file, why string }{
		{"a", a.ns, "tenants/a/a.yaml", "file holds more than 1000 documents, the cap of the Platform's spec.limits.maxFileDocuments"},
		{"big", big.ns, "tenants/a/big.yaml", "file is larger than 1048576 bytes"},
	} {
		r := result(res, tc.ns, tc.name)
		e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", r)
		e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonInvalidDeclaration))
		e.g.Expect(r.Message).To(And(ContainSubstring("declared in "+tc.file), ContainSubstring(tc.why), ContainSubstring("not removing it")))
		mi := e.instance(tc.ns, tc.name)
		e.g.Expect(mi).NotTo(BeNil(), "%s is not removed", tc.name)
		e.g.Expect(isTrue(mi, "Ready")).To(BeFalse())
		e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
		e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good), "its last good state stays")
		e.g.Expect(e.gone("apps/v1", "Deployment", tc.ns, tc.name)).To(BeFalse())
	}
	e.g.Expect(e.configMap(a.ns, "a-x").UID).To(Equal(uidA))
	e.g.Expect(e.configMap(big.ns, "big-x").UID).To(Equal(uidBig))
}

// TestUnboundedTimeoutIsRefused: an instance asking for a 10h timeout under the
// default maxTimeout (30m) is refused with the rule and keeps its last good state.
func TestUnboundedTimeoutIsRefused(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	repo := e.tenantRepo(a, b, nil)
	good := e.syncClean(repo)

	slow := strings.Replace(a.yaml(), "  timeout: 1m\n", "  timeout: 10h\n", 1)
	repo.commit("wait forever", map[string]string{"tenants/a/a.yaml": slow})
	res := e.sync(repo)

	r := result(res, a.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", r)
	e.g.Expect(r.Reason).To(Equal(declarations.ReasonLimitExceeded))
	e.g.Expect(r.Message).To(ContainSubstring(fmt.Sprintf("tenants/a/a.yaml:%d: ModuleInstance %s/a: spec.timeout: 10h0m0s exceeds the longest timeout allowed, 30m0s",
		lineOf(slow, "  timeout: 10h"), a.ns)))
	mi := e.instance(a.ns, "a")
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good))
	e.g.Expect(mi.Spec.Timeout.Duration.String()).To(Equal("1m0s"), "the refused spec is not mirrored")
	e.g.Expect(isTrue(e.instance(b.ns, "b"), "Ready")).To(BeTrue())
}

// TestInstanceCannotLoosenThePruneGuards: without the Platform's grants, an instance
// that sets pruneProtected (to delete a Namespace it rendered) or allowEmpty (to
// delete everything) is refused, and the objects stay.
func TestInstanceCannotLoosenThePruneGuards(t *testing.T) {
	e := newEnv(t)
	extraNS := e.ns + "-extra"
	e.deleteNamespacesAtEnd(extraNS)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), extra: "    namespaces: [" + extraNS + "]\n"}
	repo := newGitRepo(t, appRepo("", a))
	good := e.syncClean(repo)

	for _, tc := range []struct{ field, limit string }{
		{"pruneProtected", "allowPruneProtected"}, {"allowEmpty", "allowEmpty"},
	} {
		a.extra = "  " + tc.field + ": true\n"
		repo.commit("loosen "+tc.field, map[string]string{"instances/a.yaml": replaceOnce(a.yaml(), "    configs:\n", "    enabled: false\n    configs:\n")})
		r := result(e.sync(repo), e.ns, "a")
		e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", r)
		e.g.Expect(r.Reason).To(Equal(declarations.ReasonLimitExceeded))
		e.g.Expect(r.Message).To(ContainSubstring("spec." + tc.field + ": not granted: the Platform's spec.limits." + tc.limit + " is not true"))
		e.g.Expect(e.get("v1", "Namespace", "", extraNS)).NotTo(BeNil())
		e.expectLastGood("a", good, "x")
	}
}

// TestSmuggledPlatformCannotClaimTheRealOne: team-a's smuggled Platform names the real
// Platform's file in one of its tenants' paths, so that each Platform lies under the
// other's tenants. The last synced Platform decides: only the smuggled one is refused,
// and team-b's commit in the same revision syncs.
func TestSmuggledPlatformCannotClaimTheRealOne(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	repo := e.tenantRepo(a, b, nil)
	e.syncClean(repo)
	before := e.platformCR().Spec

	smuggled := platformYAML("  tenants:\n    - {name: grab, paths: [platform.yaml], namespaces: [x], serviceAccount: x}\n")
	b.configs = configs("x", "y")
	repo.commit("team-a claims the Platform's file", map[string]string{"tenants/a/platform.yaml": smuggled, "tenants/b/b.yaml": b.yaml()})
	res := e.sync(repo)
	e.g.Expect(res.Error).NotTo(HaveOccurred())
	e.g.Expect(failureNaming(res, "tenants/a/platform.yaml", "a Platform may not be declared under the tenant's paths")).NotTo(BeNil(), "%+v", res.Instances)
	e.g.Expect(e.platformCR().Spec).To(Equal(before))
	e.g.Expect(e.configMap(b.ns, "b-y")).NotTo(BeNil(), "the other tenant syncs")
}

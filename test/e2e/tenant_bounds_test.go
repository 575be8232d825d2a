package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

// TestOverlappingTenantsAreRefusedAtThePlatform: the platform team adds a tenant
// team-c that owns <ns>-a-pay, which team-a's pattern <ns>-a-* also matches (or
// whose paths match team-a's files); in the same commit team-a declares an instance
// in <ns>-a-pay and team-b changes its instance. The Platform is refused, naming both
// tenants and a namespace (a file) both match; the last synced Platform stays in
// force and nothing of the revision is applied or deleted.
func TestOverlappingTenantsAreRefusedAtThePlatform(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	repo := e.tenantRepo(a, b, nil)
	e.syncClean(repo)
	cmB := e.configMap(b.ns, "b-x")
	platform := platformYAML("") + tenantsPlatform(e.ns)
	platform = replaceOnce(platform, "      namespaces: ["+e.ns+"-a]\n", "      namespaces: ["+e.ns+"-a, "+e.ns+"-a-*]\n")
	repo.commit("team-a's namespaces", map[string]string{"platform.yaml": platform})
	good := e.syncClean(repo)
	before := e.platformCR().Spec

	for _, tc := range []struct{ name, tenant, want string }{
		{"namespaces", "    - {name: team-c, paths: [\"tenants/c/**\"], namespaces: [" + e.ns + "-a-pay], serviceAccount: deployer}\n",
			`tenant team-c's "` + e.ns + `-a-pay" overlaps tenant team-a's "` + e.ns + `-a-*" (spec.tenants[0]): both match namespace "` + e.ns + `-a-pay"`},
		{"paths", "    - {name: team-c, paths: [\"tenants/*/pay.yaml\"], namespaces: [" + e.ns + "-c], serviceAccount: deployer}\n",
			`tenant team-c's "tenants/*/pay.yaml" overlaps tenant team-a's "tenants/a/**" (spec.tenants[0]): both match file "tenants/a/pay.yaml"`},
	} {
		{
			pay := tenantInst("pay", e.ns+"-a-pay", "loot")
			b.configs = configs("x", "y")
			files := map[string]string{"platform.yaml": platform + tc.tenant, "tenants/a/pay.yaml": pay.yaml(), "tenants/b/b.yaml": b.yaml()}
			if tc.name == "namespaces" {
				files["tenants/a/a.yaml"] = "" // team-a's instance a leaves Git
			}
			repo.commit("team-c "+tc.name, files)
			res := e.sync(repo)

			e.g.Expect(res.Error).To(HaveOccurred())
			e.g.Expect(res.Error.Error()).To(ContainSubstring("platform.yaml:"))
			e.g.Expect(res.Error.Error()).To(ContainSubstring(tc.want))
			e.g.Expect(res.Instances).To(BeEmpty(), "no instance is touched")
			p := e.platformCR()
			e.g.Expect(p.Spec).To(Equal(before), "the last synced Platform stays in force")
			e.g.Expect(p.Status.LastSyncedRevision).To(Equal(good))
			e.g.Expect(conditions.IsFalse(p, "Ready")).To(BeTrue(), "%+v", p.Status.Conditions)
			e.g.Expect(e.instance(pay.ns, "pay")).To(BeNil())
			e.g.Expect(e.configMap(pay.ns, "pay-loot")).To(BeNil())
			e.g.Expect(e.configMap(b.ns, "b-y")).To(BeNil(), "team-b's change waits for a valid Platform")
			e.expectVictimUntouched(b.ns, string(cmB.UID), cmB.ResourceVersion)
			e.g.Expect(e.instance(a.ns, "a")).NotTo(BeNil(), "team-a's removed file deletes nothing")
			e.g.Expect(e.configMap(a.ns, "a-x")).NotTo(BeNil())
			e.g.Expect(e.gone("apps/v1", "Deployment", a.ns, "a")).To(BeFalse())
		}
	}
}

// TestNoInstanceLivesInCairnsNamespace: under namespaces.allow ["*"], a platform file
// declares an instance in cairn's namespace that reads a Secret there through
// valuesFrom. It is refused naming the namespace; no CR, object or value appears in
// cairn's namespace and the Secret is never read; the other instance syncs.
func TestNoInstanceLivesInCairnsNamespace(t *testing.T) {
	e := newEnv(t)
	repo := e.dbRepo("password: hunterhunter\n")
	e.g.Expect(e.syncClean(repo)).NotTo(BeEmpty())
	loot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: "db-values"},
		StringData: map[string]string{"values.yaml": "password: cairnsownsecret\n"}}
	e.g.Expect(e.c.Create(e.ctx, loot)).To(Succeed())
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), loot) })

	spy := strings.Replace(dbInstance(reconciler.DefaultNamespace, ""), "name: db\n", "name: spy\n", 1)
	repo.commit("an instance in cairn's namespace", map[string]string{"instances/spy.yaml": spy})
	res := e.sync(repo)

	e.g.Expect(res.Error).NotTo(HaveOccurred())
	f := failureNaming(res, "instances/spy.yaml:", `namespace "`+reconciler.DefaultNamespace+`" is cairn's own namespace: no instance may live there`)
	e.g.Expect(f).NotTo(BeNil(), "%+v", res.Instances)
	e.g.Expect(f.Reason).To(Equal(cairnv1.ReasonNamespaceDenied))
	e.g.Expect(e.instance(reconciler.DefaultNamespace, "spy")).To(BeNil())
	e.g.Expect(e.configMap(reconciler.DefaultNamespace, "spy-cfg")).To(BeNil())
	out, _ := json.Marshal(res)
	e.g.Expect(string(out)).NotTo(ContainSubstring("cairnsownsecret"))
	e.g.Expect(result(res, e.ns, "db").Action).NotTo(BeEquivalentTo("Failed"))
	e.g.Expect(e.configMap(e.ns, "db-cfg").Data).To(HaveKeyWithValue("password", "hunterhunter"))
}

// TestATenantCannotFreezeAPlatformInstance: the platform team declares instance base
// in team-a's namespace; team-a declares an instance of the same name in its own
// directory. Platform files win: team-a's declaration fails naming the platform's file,
// and the platform's instance goes on syncing (its change in the same commit applies).
func TestATenantCannotFreezeAPlatformInstance(t *testing.T) {
	e := newEnv(t)
	a, b := tenantInst("a", e.ns+"-a", "x"), tenantInst("b", e.ns+"-b", "x")
	base := inst{name: "base", ns: a.ns, replicas: 0, configs: configs("x")}
	repo := e.tenantRepo(a, b, map[string]string{"instances/base.yaml": base.yaml()})
	e.syncClean(repo)

	dup := tenantInst("base", a.ns, "loot")
	base.configs = configs("x", "y")
	repo.commit("team-a shadows base", map[string]string{"tenants/a/base.yaml": dup.yaml(), "instances/base.yaml": base.yaml()})
	res := e.sync(repo)

	e.g.Expect(res.Error).NotTo(HaveOccurred())
	f := failureNaming(res, "tenants/a/base.yaml:", "tenant team-a: ModuleInstance "+a.ns+"/base is declared by the platform team at instances/base.yaml:1")
	e.g.Expect(f).NotTo(BeNil(), "%+v", res.Instances)
	e.g.Expect(f.Reason).To(Equal("DuplicateDeclaration"))
	r := result(res, a.ns, "base")
	e.g.Expect(r.Ready).To(BeTrue(), "%+v", r)
	mi := e.instance(a.ns, "base")
	e.g.Expect(isTrue(mi, "Ready")).To(BeTrue())
	e.g.Expect(mi.Annotations["cairn.dev/source"]).To(Equal("instances/base.yaml"))
	e.g.Expect(e.configMap(a.ns, "base-y")).NotTo(BeNil(), "the platform's instance goes on syncing")
	e.g.Expect(e.configMap(a.ns, "base-loot")).To(BeNil())
	e.g.Expect(result(res, a.ns, "a").Action).NotTo(BeEquivalentTo("Failed"))
}

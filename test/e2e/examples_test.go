package e2e

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// TestExamplesRepository syncs examples/ (local and registry modules, a catalog, a
// dependsOn chain, charts, one with Helm hooks) with its modules published to the real
// registry.
func TestExamplesRepository(t *testing.T) {
	e := newEnv(t)
	host := e.cluster.RegistryHost
	e.g.Expect(host).NotTo(BeEmpty())
	// As `make demo` does: a key pair, the modules and the chart pushed and signed,
	// the public key in cairn's namespace; the examples verify under Enforce.
	keys := newKeyPair(t)
	rc, err := sign.NewClient(sign.Endpoint{Host: host, PlainHTTP: true})
	e.g.Expect(err).NotTo(HaveOccurred())
	mr := render.ModuleRegistry{Host: host, PlainHTTP: true}
	for _, m := range []struct{ dir, path string }{
		{"../../examples/registry/catalog", "cairn.dev/examples/catalog"},
		{"../../examples/registry/redis", "cairn.dev/examples/redis"},
	} {
		d, err := render.PushModule(e.ctx, m.dir, mr, "v0.1.0")
		e.g.Expect(err).NotTo(HaveOccurred(), m.dir)
		e.g.Expect(rc.Sign(e.ctx, render.ModuleRepository(mr, m.path), digestOf(d), keys.key)).To(Succeed())
	}
	for _, name := range []string{"hello", "keeper", "monitored", "migrated"} {
		pushChart(t, e.ctx, rc, "charts/"+name, chartArchive(t, name, "0.1.0", ""), keys.key)
	}
	e.putCairnSecret("cosign-pub", corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": keys.public})

	files := copyDir(t, "../../examples", "")
	for name := range files {
		files[name] = strings.ReplaceAll(files[name], "127.0.0.1:5001", host)
	}
	repo := newGitRepo(t, files)

	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	for _, key := range [][2]string{{"team-a", "base"}, {"team-a", "redis"}, {"team-a", "web"}, {"team-b", "web"}, {"team-b", "greeter"},
		{"team-c", "base"}, {"team-c", "web"}, {"team-b", "podinfo"}, {"team-b", "keeper"}, {"team-b", "metrics"}, {"team-b", "echo"},
		{"team-b", "shop"}, {"team-a", "backup-operator"}, {"team-a", "nightly-backup"}} {
		r := result(res, key[0], key[1])
		e.g.Expect(r.Ready).To(BeTrue(), "%v: %+v", key, r)
	}
	for _, key := range [][2]string{{"team-a", "redis"}, {"team-b", "greeter"}} {
		e.g.Expect(isTrue(e.instance(key[0], key[1]), cairnv1.VerifiedCondition)).To(BeTrue(), "%v", key)
	}
	e.g.Expect(e.get("v1", "ConfigMap", "team-b", "greeter-greeting").Object["data"]).To(HaveKeyWithValue("greeting", "hello from team b"))
	e.g.Expect(e.get("apps/v1", "Deployment", "team-a", "redis")).NotTo(BeNil())
	e.g.Expect(e.get("networking.k8s.io/v1", "Ingress", "team-b", "web")).NotTo(BeNil())
	podinfo := e.get("apps/v1", "Deployment", "team-b", "podinfo")
	e.g.Expect(podinfo.Object["spec"]).To(HaveKeyWithValue("replicas", BeNumerically("==", 2)), "the kustomize overlay's replicas")
	echo := e.get("apps/v1", "Deployment", "team-b", "echo")
	e.g.Expect(echo.Object["spec"]).To(HaveKeyWithValue("replicas", BeNumerically("==", 2)), "the Timoni module's values over its defaults")
	e.g.Expect(e.get("v1", "ConfigMap", "team-b", "echo").Object["data"]).To(HaveKeyWithValue("message", "hello from a Timoni module"))
	// The capabilities example sees the cluster's version (the ServiceMonitor case is
	// TestChartsSeeTheClusterCapabilities: the tests share one cluster).
	e.g.Expect(e.get("v1", "ConfigMap", "team-b", "metrics-cluster").Object["data"]).To(HaveKeyWithValue("kubeVersion", HavePrefix("v1.")))
	password := func() any {
		return e.get("v1", "Secret", "team-b", "keeper-db").Object["data"].(map[string]any)["password"]
	}
	kept := password()
	e.g.Expect(kept).NotTo(BeEmpty())
	// The hooked chart: its pre-install Secret exists and is not in the inventory, its
	// migration Job ran and was deleted once it succeeded (hook-succeeded).
	e.g.Expect(result(res, "team-b", "shop").Message).To(ContainSubstring("hooks run: 2 pre-install"))
	e.g.Expect(e.get("v1", "Secret", "team-b", "shop-db")).NotTo(BeNil())
	e.g.Expect(e.get("batch/v1", "Job", "team-b", "shop-migrate")).To(BeNil())
	e.g.Expect(e.get("apps/v1", "Deployment", "team-b", "shop")).NotTo(BeNil())
	// The provider contract: the backup comes first in its file with no dependsOn,
	// and is applied after the operator that provides its kind.
	e.g.Expect(e.instance("team-a", "backup-operator").Status.Provides).To(Equal([]string{"BackupSchedule.backups.example.com"}))
	e.g.Expect(e.instance("team-a", "nightly-backup").Status.Requires).To(Equal([]cairnv1.ContractRequirement{
		{Instance: "team-a/backup-operator", Kinds: []string{"BackupSchedule.backups.example.com"}}}))
	e.g.Expect(e.get("backups.example.com/v1", "BackupSchedule", "team-a", "nightly-backup")).NotTo(BeNil())
	ns := e.get("v1", "Namespace", "", "team-a")
	e.g.Expect(ns.GetLabels()).To(HaveKeyWithValue("team", "a"))
	e.g.Expect(e.instance("team-a", "redis").Status.SourceDigest).To(HavePrefix("sha256:"))
	e.g.Expect(e.instance("team-c", "web").Status.ServiceAccount).To(Equal("deployer"), "the tenant's instance applies as its ServiceAccount")
	e.g.Expect(e.instance("team-a", "web").Status.ServiceAccount).To(BeEmpty())

	// The backup operator's CRD added an API version the charts see
	// (.Capabilities.APIVersions): the next sync renders the charts again, and only
	// them, as `helm upgrade` would see the new API.
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, "team-b", "greeter").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	e.g.Expect(result(res, "team-a", "redis").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(result(res, "team-a", "backup-operator").Action).To(BeEquivalentTo("Unchanged"))

	// A value change in the registry-module instance re-renders only it (and web, which depends on it).
	files["instances/team-a.yaml"] = strings.Replace(files["instances/team-a.yaml"], "maxMemory: 64mb", "maxMemory: 128mb", 1)
	repo.commit("more memory for redis", map[string]string{"instances/team-a.yaml": files["instances/team-a.yaml"]})
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, "team-a", "redis").Action).To(BeEquivalentTo("Updated"))
	e.g.Expect(result(res, "team-a", "web").Action).To(BeEquivalentTo("Updated"), "web depends on redis")
	e.g.Expect(result(res, "team-a", "base").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(result(res, "team-b", "web").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(result(res, "team-b", "greeter").Action).To(BeEquivalentTo("Unchanged"))

	// The lookup example: a values change re-renders keeper, and its password stays.
	repo.commit("another database", map[string]string{"instances/charts.yaml": strings.Replace(files["instances/charts.yaml"], "database: orders", "database: invoices", 1)})
	res = e.sync(repo)
	e.g.Expect(result(res, "team-b", "keeper").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", "team-b", "keeper-db").Object["data"]).To(HaveKeyWithValue("database", "invoices"))
	e.g.Expect(password()).To(Equal(kept), "lookup keeps the password across a values change")
}

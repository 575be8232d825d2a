package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
)

// kustomizeFiles is a Flux-style apps/ layout: a base and an overlay that sets a
// name prefix, the image tag, the replicas and a generated ConfigMap.
func kustomizeFiles(replicas int) map[string]string {
	return map[string]string{
		"apps/base/kustomization.yaml": "resources: [deployment.yaml]\n",
		"apps/base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
      - name: podinfo
        image: ghcr.io/stefanprodan/podinfo:6.7.0
`,
		"apps/prod/kustomization.yaml": fmt.Sprintf(`namePrefix: prod-
resources: [../base]
images:
- {name: ghcr.io/stefanprodan/podinfo, newTag: 6.7.1}
replicas:
- {name: podinfo, count: %d}
configMapGenerator:
- {name: settings, literals: [LEVEL=info]}
`, replicas),
	}
}

func kustomizeInstance(name, ns, path string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  module:\n    kustomize:\n      path: %s\n  timeout: 1m\n", name, ns, path)
}

// TestKustomizeDirectoryIsBuiltAndFollowsItsBase: an instance of a kustomize overlay
// applies what `kustomize build` gives (prefix, image tag, replicas, a generated
// ConfigMap with its hash suffix) into the instance's namespace and becomes Ready; a
// change in the base re-applies it, a change elsewhere leaves it alone; an instance
// with a remote base fails with UnsafeModule while the other syncs.
func TestKustomizeDirectoryIsBuiltAndFollowsItsBase(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 1}
	files := appRepo("", a)
	for p, c := range kustomizeFiles(2) {
		files[p] = c
	}
	files["instances/podinfo.yaml"] = kustomizeInstance("podinfo", e.ns, "./apps/prod")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "podinfo").Action).To(BeEquivalentTo("Created"))
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "prod-podinfo"}, &d)).To(Succeed())
	e.g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	e.g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/stefanprodan/podinfo:6.7.1"))
	mi := e.instance(e.ns, "podinfo")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue(), "%+v", mi.Status.Conditions)
	e.g.Expect(mi.Status.Inventory.Count).To(Equal(int32(2)), "the Deployment and the generated ConfigMap")
	e.g.Expect(mi.Status.SourceDigest).To(HavePrefix("sha256:"))

	// A change in the base (not in the overlay's directory) re-applies the instance;
	// a new ConfigMap, so that no rollout has to finish on a loaded cluster.
	sha := repo.commit("base: a ConfigMap", map[string]string{
		"apps/base/kustomization.yaml": "resources: [deployment.yaml, extra.yaml]\n",
		"apps/base/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata: {x: \"1\"}\n",
	})
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "podinfo").Action).To(BeEquivalentTo("Updated"))
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(e.instance(e.ns, "podinfo").Status.LastAppliedRevision).To(Equal(sha))
	e.g.Expect(e.configMap(e.ns, "prod-extra")).NotTo(BeNil(), "the base's new object, with the overlay's prefix")
	e.g.Expect(e.instance(e.ns, "podinfo").Status.Inventory.Count).To(Equal(int32(3)))

	// A change elsewhere leaves it alone; a remote base fails only its own instance.
	repo.commit("a remote base", map[string]string{
		"apps/remote/kustomization.yaml": "resources:\n- https://github.com/stefanprodan/podinfo//kustomize?ref=6.7.1\n",
		"instances/remote.yaml":          kustomizeInstance("remote", e.ns, "apps/remote"),
		"README.md":                      "changed\n",
	})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "podinfo").Action).To(BeEquivalentTo("Unchanged"))
	remote := result(res, e.ns, "remote")
	e.g.Expect(remote.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(remote.Reason).To(Equal("UnsafeModule"), remote.Message)
	e.g.Expect(remote.Message).To(ContainSubstring("apps/remote/kustomization.yaml"))
	e.g.Expect(remote.Message).To(ContainSubstring("remote bases, files and URLs are not available"))
	e.g.Expect(conditions.IsStalled(e.instance(e.ns, "remote"))).To(BeTrue())
	e.g.Expect(e.instance(e.ns, "remote").Status.Conditions).To(ContainElement(HaveField("Reason", "UnsafeModule")))
}

// TestKustomizePathsAreRelativeToTheRepository: as Flux builds apps/production from
// a Kustomization under clusters/production, an instance declared under --path
// clusters/production builds ./apps/production (outside --path) and becomes Ready; a
// change in its base, outside --path too, re-applies it; an instance naming the root
// "." builds the root's kustomization; a tenant's instance naming a directory outside
// its paths is refused naming the rule, and only it fails.
func TestKustomizePathsAreRelativeToTheRepository(t *testing.T) {
	e := newEnv(t)
	e.withOptions(func(o *reconciler.Options) { o.Path = "clusters/production" })
	e.grantNamespace(e.ns+"-a", "*")
	files := map[string]string{
		"clusters/production/platform.yaml": platformYAML(tenantsPlatform(e.ns)),
		"clusters/production/podinfo.yaml":  kustomizeInstance("podinfo", e.ns, "./apps/production"),
		"clusters/production/root.yaml":     kustomizeInstance("root", e.ns, "."),
		"clusters/production/tenants/a/grab.yaml": kustomizeInstance("grab", e.ns+"-a", "./apps/production") +
			"  serviceAccountName: deployer\n",
		"kustomization.yaml": "resources: [root.yaml]\n",
		"root.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-the-root\ndata: {x: \"1\"}\n",
	}
	for p, c := range kustomizeFiles(2) {
		files[strings.Replace(p, "apps/prod/", "apps/production/", 1)] = c
	}
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "podinfo").Ready).To(BeTrue(), "%+v", res)
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "prod-podinfo"}, &d)).To(Succeed())
	e.g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	e.g.Expect(result(res, e.ns, "root").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.configMap(e.ns, "from-the-root")).NotTo(BeNil(), "the root's kustomization is built")

	grab := result(res, e.ns+"-a", "grab")
	e.g.Expect(grab.Action).To(BeEquivalentTo("Failed"), "%+v", grab)
	e.g.Expect(grab.Reason).To(Equal("TenantViolation"), grab.Message)
	e.g.Expect(grab.Message).To(And(ContainSubstring("spec.module.kustomize.path"), ContainSubstring(`"./apps/production" is outside the tenant's paths`),
		ContainSubstring("tenants/a/grab.yaml")))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns+"-a", "prod-podinfo")).To(BeNil(), "nothing of the refused instance is applied")

	// The base lies outside --path: a change there re-applies the instance.
	sha := repo.commit("base: a ConfigMap", map[string]string{
		"apps/base/kustomization.yaml": "resources: [deployment.yaml, extra.yaml]\n",
		"apps/base/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata: {x: \"1\"}\n",
	})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "podinfo").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	e.g.Expect(e.instance(e.ns, "podinfo").Status.LastAppliedRevision).To(Equal(sha))
	e.g.Expect(e.configMap(e.ns, "prod-extra")).NotTo(BeNil())
}

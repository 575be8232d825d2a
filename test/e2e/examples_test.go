package e2e

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/render"
)

// TestExamplesRepository syncs examples/ (local and registry modules, a catalog, a
// dependsOn chain) with its modules published to the real registry.
func TestExamplesRepository(t *testing.T) {
	e := newEnv(t)
	host := e.cluster.RegistryHost
	e.g.Expect(host).NotTo(BeEmpty())
	for _, dir := range []string{"../../examples/registry/catalog", "../../examples/registry/redis"} {
		_, err := render.PushModule(e.ctx, dir, render.ModuleRegistry{Host: host, PlainHTTP: true}, "v0.1.0")
		e.g.Expect(err).NotTo(HaveOccurred(), dir)
	}
	files := copyDir(t, "../../examples", "")
	files["registries.yaml"] = strings.ReplaceAll(files["registries.yaml"], "127.0.0.1:5001", host)
	repo := newGitRepo(t, files)

	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	for _, key := range [][2]string{{"team-a", "base"}, {"team-a", "redis"}, {"team-a", "web"}, {"team-b", "web"}} {
		r := result(res, key[0], key[1])
		e.g.Expect(r.Ready).To(BeTrue(), "%v: %+v", key, r)
	}
	e.g.Expect(e.get("apps/v1", "Deployment", "team-a", "redis")).NotTo(BeNil())
	e.g.Expect(e.get("networking.k8s.io/v1", "Ingress", "team-b", "web")).NotTo(BeNil())
	ns := e.get("v1", "Namespace", "", "team-a")
	e.g.Expect(ns.GetLabels()).To(HaveKeyWithValue("team", "a"))
	e.g.Expect(e.instance("team-a", "redis").Status.SourceDigest).To(HavePrefix("sha256:"))

	// A value change in the registry-module instance re-renders only it (and web, which depends on it).
	files["instances/team-a.yaml"] = strings.Replace(files["instances/team-a.yaml"], "maxMemory: 64mb", "maxMemory: 128mb", 1)
	repo.commit("more memory for redis", map[string]string{"instances/team-a.yaml": files["instances/team-a.yaml"]})
	res = e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, "team-a", "redis").Action).To(Equal("Updated"))
	e.g.Expect(result(res, "team-a", "web").Action).To(Equal("Updated"), "web depends on redis")
	e.g.Expect(result(res, "team-a", "base").Action).To(Equal("Unchanged"))
	e.g.Expect(result(res, "team-b", "web").Action).To(Equal("Unchanged"))
}

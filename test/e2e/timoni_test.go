package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/test/harness"
)

// timoniModuleDir is the Timoni-style module of render's tests (written for cairn's
// tests): a ConfigMap, a Service and a Deployment from templates, its values' defaults
// in values.cue, schemas vendored under cue.mod/gen and cue.mod/pkg.
const timoniModuleDir = "../../render/testdata/timoni/webapp"

// timoniInstance declares an instance of a Timoni module (module is the YAML of
// spec.module.timoni's fields) with values.
func timoniInstance(name, ns, module, values string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    timoni: {%s}\n  timeout: 1m\n  values: %s\n", name, ns, module, values)
}

// timoniLayers splits a module into Timoni's two layers: the vendored cue.mod and the
// rest.
func timoniLayers(files map[string]string) []map[string][]byte {
	vendor, module := map[string][]byte{}, map[string][]byte{}
	for p, c := range files {
		if strings.HasPrefix(p, "cue.mod/") {
			vendor[p] = []byte(c)
		} else {
			module[p] = []byte(c)
		}
	}
	return []map[string][]byte{vendor, module}
}

// expectTimoniApp checks the objects of the webapp module for instance name: the
// Deployment's replicas, the ConfigMap's data (defaults merged with the values) and the
// module version of its tag.
func (e *env) expectTimoniApp(name string, replicas int32, color, moduleVersion string) {
	e.t.Helper()
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &d)).To(Succeed())
	e.g.Expect(*d.Spec.Replicas).To(Equal(replicas))
	e.g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/version", moduleVersion))
	cm := e.configMap(e.ns, name)
	e.g.Expect(cm).NotTo(BeNil())
	e.g.Expect(cm.Data).To(HaveKeyWithValue("COLOR", color))
	e.g.Expect(cm.Data).To(HaveKeyWithValue("LOG_LEVEL", "info"), "a default the values do not override")
	e.g.Expect(cm.Data).To(HaveKeyWithValue("moduleVersion", moduleVersion))
	e.g.Expect(cm.Data).To(HaveKeyWithValue("kubeMinor", "37"), "the kubeVersion tag is the cluster's")
	var svc corev1.Service
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &svc)).To(Succeed())
}

// TestTimoniModuleFromTheRepository: a Timoni module in the repository, unchanged,
// becomes Ready with the instance's values over values.cue's concrete defaults
// (replicas 1 -> 2); a change in its directory re-applies it; an instance whose module
// holds a symbolic link that leaves the repository fails alone (UnsafeModule, naming
// the link and the instance) while the other stays Ready.
func TestTimoniModuleFromTheRepository(t *testing.T) {
	e := newEnv(t)
	module := copyDir(t, timoniModuleDir, "modules/webapp")
	files := map[string]string{"platform.yaml": platformYAML(""),
		"instances/web.yaml": timoniInstance("web", e.ns, "path: ./modules/webapp", `{replicas: 2, env: {COLOR: green}}`)}
	maps.Copy(files, module)
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.expectTimoniApp("web", 2, "green", "0.0.0-devel")
	mi := e.instance(e.ns, "web")
	e.g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue(), "%+v", mi.Status.Conditions)
	e.g.Expect(mi.Status.Inventory.Count).To(Equal(int32(3)))

	// A change in the module's directory re-applies it; a copy of it with a symbolic
	// link in its vendored cue.mod/pkg fails only its own instance.
	broken := copyDir(t, timoniModuleDir, "modules/broken")
	broken["instances/broken.yaml"] = timoniInstance("broken", e.ns, "path: modules/broken", "{}")
	broken["modules/webapp/values.cue"] = strings.Replace(module["modules/webapp/values.cue"], `COLOR: "blue"`, `COLOR: "red", EXTRA: "x"`, 1)
	repo.commitSymlink("modules/broken/cue.mod/pkg/k8s.io", "../../../../../outside", broken)
	res = e.sync(repo)
	web := result(res, e.ns, "web")
	e.g.Expect(web.Action).To(BeEquivalentTo("Updated"), "%+v", res)
	e.g.Expect(web.Ready).To(BeTrue())
	e.g.Expect(e.configMap(e.ns, "web").Data).To(HaveKeyWithValue("EXTRA", "x"))
	e.g.Expect(e.configMap(e.ns, "web").Data).To(HaveKeyWithValue("COLOR", "green"), "the instance's value still wins")
	got := result(res, e.ns, "broken")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Reason).To(Equal("UnsafeModule"), got.Message)
	e.g.Expect(got.Message).To(And(ContainSubstring("modules/broken/cue.mod/pkg/k8s.io"), ContainSubstring("symbolic link"),
		ContainSubstring(e.ns+"/broken")))
	e.g.Expect(conditions.IsStalled(e.instance(e.ns, "broken"))).To(BeTrue())
	e.g.Expect(conditions.IsTrue(e.instance(e.ns, "web"), "Ready")).To(BeTrue())

	// A change outside its directory leaves it alone.
	repo.commit("elsewhere", map[string]string{"README.md": "changed\n"})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Action).To(BeEquivalentTo("Unchanged"), "%+v", res)
}

// vendoredElsewhere returns the webapp module under dir without its cue.mod/pkg, and
// that cue.mod/pkg's files under pkg: the module's vendored package kept elsewhere in
// the repository, as Timoni's own modules keep it (cue.mod/pkg a link to it).
func vendoredElsewhere(t *testing.T, dir, pkg string) map[string]string {
	out := map[string]string{}
	for p, c := range copyDir(t, timoniModuleDir, dir) {
		if rest, ok := strings.CutPrefix(p, dir+"/cue.mod/pkg/"); ok {
			out[pkg+"/"+rest] = c
			continue
		}
		out[p] = c
	}
	return out
}

// TestTimoniModuleWithLinkedVendoredPackage: a Timoni module whose cue.mod/pkg is a
// symbolic link to a directory elsewhere in the repository renders and becomes Ready,
// and a change in the linked directory re-applies it; a link that leaves the
// repository fails that instance naming the link; a tenant's module whose link leads
// into another tenant's paths fails naming the link and both owners, reading nothing
// of the other tenant's.
func TestTimoniModuleWithLinkedVendoredPackage(t *testing.T) {
	e := newEnv(t)
	e.grantNamespace(e.ns+"-a", "*")
	files := map[string]string{"platform.yaml": platformYAML(tenantsPlatform(e.ns)),
		"instances/web.yaml":    timoniInstance("web", e.ns, "path: ./modules/webapp", `{replicas: 2, env: {COLOR: green}}`),
		"instances/escape.yaml": timoniInstance("escape", e.ns, "path: ./modules/escape", "{}"),
		"tenants/a/web.yaml": timoniInstance("grab", e.ns+"-a", "path: ./tenants/a/webapp", "{}") +
			"  serviceAccountName: deployer\n",
	}
	maps.Copy(files, vendoredElsewhere(t, "modules/webapp", "schemas/timoni"))
	maps.Copy(files, vendoredElsewhere(t, "modules/escape", "schemas/unused"))
	maps.Copy(files, vendoredElsewhere(t, "tenants/a/webapp", "tenants/b/schemas"))
	repo := newGitRepo(t, files)
	repo.commitSymlink("modules/webapp/cue.mod/pkg", "../../../schemas/timoni", nil)
	repo.commitSymlink("modules/escape/cue.mod/pkg", "../../../../outside", nil)
	repo.commitSymlink("tenants/a/webapp/cue.mod/pkg", "../../../b/schemas", nil)
	res := e.sync(repo)
	web := result(res, e.ns, "web")
	e.g.Expect(web.Ready).To(BeTrue(), "%+v", web)
	e.expectTimoniApp("web", 2, "green", "0.0.0-devel")

	escape := result(res, e.ns, "escape")
	e.g.Expect(escape.Action).To(BeEquivalentTo("Failed"), "%+v", escape)
	e.g.Expect(escape.Reason).To(Equal("UnsafeModule"), escape.Message)
	e.g.Expect(escape.Message).To(And(ContainSubstring("modules/escape/cue.mod/pkg: symbolic link not followed"),
		ContainSubstring("leaves the repository"), ContainSubstring(e.ns+"/escape")))

	grab := result(res, e.ns+"-a", "grab")
	e.g.Expect(grab.Action).To(BeEquivalentTo("Failed"), "%+v", grab)
	e.g.Expect(grab.Reason).To(Equal("UnsafeModule"), grab.Message)
	e.g.Expect(grab.Message).To(And(ContainSubstring("tenants/a/webapp/cue.mod/pkg: symbolic link not followed"),
		ContainSubstring("belongs to tenant team-b, not to tenant team-a")))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns+"-a", "grab")).To(BeNil())

	// A change in the linked directory, outside the module's, re-applies it.
	meta := "schemas/timoni/timoni.sh/core/v1alpha1/metadata.cue"
	sha := repo.commit("schemas: a label", map[string]string{meta: strings.Replace(files[meta],
		`"app.kubernetes.io/version":`, `"example.com/schemas": "v2"`+"\n\t\t\"app.kubernetes.io/version\":", 1)})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Action).To(BeEquivalentTo("Updated"), "%+v", res)
	e.g.Expect(e.instance(e.ns, "web").Status.LastAppliedRevision).To(Equal(sha))
}

// TestTimoniModuleFromARegistry: a module pushed as `timoni mod push` pushes it (two
// layers of Timoni's media types) to the real docker-registry and signed with cosign
// renders under Enforce with its version as moduleVersion and the instance's values;
// an unsigned version fails that instance (SignatureMissing) and keeps the last good
// objects; a Helm chart named as a Timoni module is refused naming the media type.
func TestTimoniModuleFromARegistry(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, false)
	rc := registryClient(t, reg, false)
	trusted := newKeyPair(t)
	e.putCairnSecret("pub-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": trusted.public})
	layers := timoniLayers(copyDir(t, timoniModuleDir, ""))
	signed, err := harness.PushTimoniArtifact(e.ctx, reg.Host, "modules/webapp", "1.0.0", harness.TimoniArtifact{Layers: layers})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(rc.Sign(e.ctx, "modules/webapp", digestOf(signed), trusted.key)).To(Succeed())
	layers[1]["README.md"] = []byte("# unsigned\n")
	_, err = harness.PushTimoniArtifact(e.ctx, reg.Host, "modules/webapp", "1.1.0", harness.TimoniArtifact{Layers: layers})
	e.g.Expect(err).NotTo(HaveOccurred())
	chart := pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", "hi"), trusted.key)

	url := "oci://" + reg.Host + "/modules/webapp"
	oci := func(version string) string {
		return timoniInstance("oci", e.ns, "url: '"+url+"', version: '"+version+"'", `{replicas: 3, env: {COLOR: yellow}}`)
	}
	files := map[string]string{
		"platform.yaml": platformWithVerify("Enforce", ""),
		"registries.yaml": registryYAML("modules", reg.Host, true,
			"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+e.ns+"}}]\n"),
		"instances/oci.yaml": oci("1.0.0"),
	}
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "oci").Ready).To(BeTrue(), "%+v", res)
	e.expectTimoniApp("oci", 3, "yellow", "1.0.0")
	mi := e.instanceCR(e.ns, "oci")
	e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue())
	e.g.Expect(mi.Status.Artifacts).To(HaveLen(1))
	e.g.Expect(mi.Status.Artifacts[0].Digest).To(Equal(signed))
	e.g.Expect(mi.Status.SourceDigest).To(Equal(signed))

	repo.commit("unsigned version", map[string]string{"instances/oci.yaml": oci("1.1.0")})
	got := result(e.sync(repo), e.ns, "oci")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonSignatureMissing), got.Message)
	e.expectTimoniApp("oci", 3, "yellow", "1.0.0")

	repo.commit("a chart", map[string]string{"instances/oci.yaml": timoniInstance("oci", e.ns,
		"url: 'oci://"+reg.Host+"/charts/hello', version: '0.1.0'", "{}")})
	got = result(e.sync(repo), e.ns, "oci")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Message).To(ContainSubstring(`config media type "application/vnd.cncf.helm.config.v1+json" is not a Timoni module's`))
	e.g.Expect(got.Message).To(ContainSubstring(chart.String()))
	e.expectTimoniApp("oci", 3, "yellow", "1.0.0")
	e.logEverything()
}

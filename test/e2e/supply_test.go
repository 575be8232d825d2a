package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// TestSignedChartFromAuthenticatedRegistry syncs a Helm chart from a registry behind
// htpasswd auth under Enforce: a signed chart applies and is Verified; an unsigned
// version, one signed by another key, and a schema-breaking value each fail that
// instance with a typed reason while the last good objects stay; Warn lets the
// unsigned version through and says so.
func TestSignedChartFromAuthenticatedRegistry(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, true, false)
	rc := registryClient(t, reg, true)
	trusted, other := newKeyPair(t), newKeyPair(t)
	suffix := e.ns
	e.putCairnSecret("creds-"+suffix, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("pub-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": trusted.public})

	d1 := pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", "hi"), trusted.key)
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.2.0", "unsigned"), nil)
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.3.0", "other"), other.key)

	url := "oci://" + reg.Host + "/charts/hello"
	registry := registryYAML("charts", reg.Host, true, "  secretRef: {name: creds-"+suffix+"}\n"+
		"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+suffix+"}}]\n")
	files := map[string]string{
		"platform.yaml":   platformWithVerify("Enforce", ""),
		"registries.yaml": registry,
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.1.0",
			"  values:\n    greeting: bonjour\n"),
	}
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
	cm := e.get("v1", "ConfigMap", e.ns, "hello-greeting")
	e.g.Expect(cm).NotTo(BeNil())
	e.g.Expect(cm.Object["data"]).To(HaveKeyWithValue("greeting", "bonjour"))
	e.g.Expect(cm.Object["data"]).To(HaveKeyWithValue("namespace", e.ns))
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "hello")).NotTo(BeNil())
	mi := e.instanceCR(e.ns, "hello")
	e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue())
	e.g.Expect(mi.Status.Artifacts).To(HaveLen(1))
	e.g.Expect(mi.Status.Artifacts[0].Digest).To(Equal(d1.String()))
	e.g.Expect(mi.Status.Artifacts[0].Verification).To(Equal(cairnv1.VerificationVerified))
	e.g.Expect(mi.Status.Artifacts[0].KeyID).To(Equal(trusted.key.Public().ID()))
	e.g.Expect(mi.Status.SourceDigest).To(Equal(d1.String()))
	var r cairnv1.Registry
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: "charts"}, &r)).To(Succeed())
	e.g.Expect(isReadyCond(r.Status.Conditions)).To(BeTrue())

	// The plan of a change shows the verification of each artifact it would use.
	repo.commit("plan me", map[string]string{"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.3.0",
		"  values:\n    greeting: bonjour\n")})
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	planned := instancePlan(plan, "hello")
	e.g.Expect(planned.Action).To(BeEquivalentTo("Error"))
	e.g.Expect(planned.Reason).To(Equal(cairnv1.ReasonSignatureInvalid))
	e.g.Expect(planned.Artifacts).To(HaveLen(1))
	e.g.Expect(planned.Artifacts[0].Verification).To(Equal(cairnv1.VerificationFailed))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("❌ **Failed** `" + reg.Host + "/charts/hello:0.3.0@sha256:"))

	failsWith := func(version, reason string) {
		t.Helper()
		repo.commit("hello "+version, map[string]string{"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, version,
			"  values:\n    greeting: bonjour\n")})
		res := e.sync(repo)
		got := result(res, e.ns, "hello")
		e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%+v", got)
		e.g.Expect(got.Reason).To(Equal(reason), "%+v", got)
		e.g.Expect(got.Retry).To(Equal(outcome.Stalled))
		mi := e.instanceCR(e.ns, "hello")
		e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeFalse())
		e.g.Expect(mi.Status.LastAppliedRevision).NotTo(Equal(mi.Status.LastAttemptedRevision))
		// The last good objects stay as they were.
		e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting").Object["data"]).To(HaveKeyWithValue("greeting", "bonjour"))
	}
	failsWith("0.2.0", cairnv1.ReasonSignatureMissing)
	failsWith("0.3.0", cairnv1.ReasonSignatureInvalid)

	// Values that fail the chart's schema: stalled, named, nothing applied.
	repo.commit("bad values", map[string]string{"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.1.0",
		"  values:\n    greeting: \"\"\n    colour: red\n")})
	res = e.sync(repo)
	got := result(res, e.ns, "hello")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Message).To(ContainSubstring("hello"))
	e.g.Expect(got.Message).To(Or(ContainSubstring("greeting"), ContainSubstring("colour")))

	// Warn: the unsigned version is used and reported.
	repo.commit("warn", map[string]string{
		"platform.yaml": platformWithVerify("Warn", ""),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.2.0",
			"  values:\n    greeting: warned\n"),
	})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
	mi = e.instanceCR(e.ns, "hello")
	e.g.Expect(mi.Status.Artifacts[0].Verification).To(Equal(cairnv1.VerificationUnverified))
	e.g.Expect(mi.Status.Artifacts[0].Message).To(ContainSubstring("SignatureMissing"))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting").Object["data"]).To(HaveKeyWithValue("greeting", "warned"))
	e.logEverything()
}

// TestRegistrySecretShapes: a docker config Secret works; a Secret of unknown shape or
// with empty keys makes the Registry not Ready (UnsupportedSecret) and fails the
// instance, never falling back to anonymous access.
func TestRegistrySecretShapes(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, true, false)
	rc := registryClient(t, reg, true)
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", ""), nil)
	url := "oci://" + reg.Host + "/charts/hello"
	secret := "creds-" + e.ns
	files := map[string]string{
		"platform.yaml":        platformWithVerify("Off", ""),
		"registries.yaml":      registryYAML("charts", reg.Host, true, "  secretRef: {name: "+secret+"}\n"),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.1.0", ""),
	}
	repo := newGitRepo(t, files)

	e.putCairnSecret(secret, corev1.SecretTypeDockerConfigJson, dockerConfigData(reg.Host))
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
	mi := e.instanceCR(e.ns, "hello")
	e.g.Expect(mi.Status.Artifacts[0].Verification).To(Equal(cairnv1.VerificationSkipped))

	for name, data := range map[string]map[string][]byte{
		"unknown shape": {"token": []byte(testRegistryPassword)},
		"empty keys":    {"username": []byte(""), "password": []byte("")},
	} {
		e.putCairnSecret(secret, corev1.SecretTypeOpaque, data)
		repo.commit(name, map[string]string{"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.1.0",
			"  values:\n    greeting: "+strings.ReplaceAll(name, " ", "-")+"\n")})
		res := e.sync(repo)
		got := result(res, e.ns, "hello")
		e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), name)
		e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonUnsupportedSecret), name)
		e.g.Expect(got.Message).NotTo(ContainSubstring(testRegistryPassword))
		var r cairnv1.Registry
		e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Name: "charts"}, &r)).To(Succeed())
		e.g.Expect(isReadyCond(r.Status.Conditions)).To(BeFalse(), name)
		e.g.Expect(readyReason(r.Status.Conditions)).To(Equal(cairnv1.ReasonUnsupportedSecret), name)
	}

	// No Secret at all against an authenticated registry: 401, not a silent success.
	repo.commit("anonymous", map[string]string{"registries.yaml": registryYAML("charts", reg.Host, true, "")})
	res = e.sync(repo)
	got := result(res, e.ns, "hello")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Message).To(MatchRegexp(`(?i)unauthori[sz]ed|401`))
	e.logEverything()
}

// TestRegistryWithTestCA pulls a chart over TLS from a registry whose certificate a
// test CA issued: with the CA ConfigMap it works; without it the certificate is
// refused.
func TestRegistryWithTestCA(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, true)
	rc := registryClient(t, reg, false)
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", ""), nil)
	ca, err := os.ReadFile(reg.CAFile)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.putCairnConfigMap("ca-"+e.ns, map[string]string{"ca.crt": string(ca)})
	url := "oci://" + reg.Host + "/charts/hello"
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":        platformWithVerify("Off", ""),
		"registries.yaml":      registryYAML("tls", reg.Host, false, ""),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, url, "0.1.0", ""),
	})
	res := e.sync(repo)
	got := result(res, e.ns, "hello")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Message).To(MatchRegexp(`(?i)certificate|x509`))

	repo.commit("ca", map[string]string{"registries.yaml": registryYAML("tls", reg.Host, false, "  caConfigMap: ca-"+e.ns+"\n")})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
}

// TestSignedCUEModules serves the example CUE modules from an authenticated registry
// under Enforce: signed modules render; a module version that is not signed fails
// with SignatureMissing before anything of it is used.
func TestSignedCUEModules(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, true, false)
	keys := newKeyPair(t)
	rc := registryClient(t, reg, true)
	mr := render.ModuleRegistry{Host: reg.Host, PlainHTTP: true, Username: testRegistryUser, Password: testRegistryPassword}
	for _, m := range []struct{ dir, path, version string }{
		{"../../examples/registry/catalog", "cairn.dev/examples/catalog", "v0.1.0"},
		{"../../examples/registry/redis", "cairn.dev/examples/redis", "v0.1.0"},
		{changedCopy(t, "../../examples/registry/redis"), "cairn.dev/examples/redis", "v0.1.1"},
	} {
		d, err := render.PushModule(e.ctx, m.dir, mr, m.version)
		e.g.Expect(err).NotTo(HaveOccurred())
		if m.version == "v0.1.1" {
			continue // published, never signed
		}
		e.g.Expect(rc.Sign(e.ctx, render.ModuleRepository(mr, m.path), digestOf(d), keys.key)).To(Succeed())
	}
	suffix := e.ns
	e.putCairnSecret("creds-"+suffix, corev1.SecretTypeOpaque, basicAuthData())
	e.putCairnSecret("pub-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": keys.public})
	redis := func(version string) string {
		return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: cache\n  namespace: " + e.ns +
			"\nspec:\n  module:\n    cue: {path: cairn.dev/examples/redis@v0, version: " + version + "}\n  timeout: 1m\n"
	}
	repo := newGitRepo(t, map[string]string{
		"platform.yaml": platformWithVerify("Enforce", "  moduleRegistry: modules\n  catalogs:\n    - {module: cairn.dev/examples/catalog@v0, version: v0.1.0}\n"),
		"registries.yaml": registryYAML("modules", reg.Host, true, "  secretRef: {name: creds-"+suffix+"}\n"+
			"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+suffix+", key: cosign.pub}}]\n"),
		"instances/cache.yaml": redis("v0.1.0"),
	})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "cache").Ready).To(BeTrue(), "%+v", res)
	mi := e.instanceCR(e.ns, "cache")
	e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue())
	e.g.Expect(mi.Status.Artifacts).To(HaveLen(2)) // the module and the catalog
	for _, a := range mi.Status.Artifacts {
		e.g.Expect(a.Verification).To(Equal(cairnv1.VerificationVerified), "%+v", a)
	}

	repo.commit("unsigned module", map[string]string{"instances/cache.yaml": redis("v0.1.1")})
	res = e.sync(repo)
	got := result(res, e.ns, "cache")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonSignatureMissing), "%+v", got)
	e.logEverything()
}

// TestPublishSignedRenders publishes each render as a signed OCI artifact to another
// registry: the status records it, cairn's verify accepts it, the content is the
// objects, the same render is not pushed again, and with the publish registry down
// the changed render is not applied (the last good state stays) until it is back.
func TestPublishSignedRenders(t *testing.T) {
	e := newEnv(t)
	pub := startRegistry(t, true, false)
	keys := newKeyPair(t)
	suffix := e.ns
	e.putCairnSecret("pub-creds-"+suffix, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	publishRegistry := func(host string) string {
		return registryYAML("rendered", host, true, "  secretRef: {name: pub-creds-"+suffix+"}\n  signing:\n    keySecretRef: {name: signing-"+suffix+"}\n")
	}
	files := appRepo("  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n",
		inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a")})
	files["registries.yaml"] = publishRegistry(pub.Host)
	repo := newGitRepo(t, files)
	sha := repo.commit("noop", map[string]string{"README.md": "publish\n"})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	mi := e.instanceCR(e.ns, "web")
	e.g.Expect(mi.Status.Published).NotTo(BeNil())
	e.g.Expect(mi.Status.Published.Revision).To(Equal(sha))
	tag := strings.ReplaceAll(mi.Status.RenderDigest, ":", "-")
	repoPath := "rendered/cluster/" + e.ns + "/web"
	e.g.Expect(mi.Status.Published.Ref).To(Equal(pub.Host + "/" + repoPath + ":" + tag))

	rc := registryClient(t, pub, true)
	verified, err := rc.Verify(e.ctx, repoPath, digestOf(mi.Status.Published.Digest), []*sign.PublicKey{keys.key.Public()})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(verified.Digest.String()).To(Equal(mi.Status.Published.Digest))
	files2, ann, err := rc.PullArtifact(e.ctx, repoPath, digestOf(mi.Status.Published.Digest))
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(files2).To(HaveLen(1))
	e.g.Expect(string(files2[0].Data)).To(ContainSubstring("name: web-a"))
	e.g.Expect(ann).To(HaveKeyWithValue("org.opencontainers.image.revision", sha))
	e.g.Expect(string(files2[0].Data)).NotTo(ContainSubstring(testRegistryPassword))

	// A commit that does not change the render re-uses the artifact (same digest, first revision).
	first := *mi.Status.Published
	repo.commit("touch", map[string]string{"instances/web.yaml": inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a"),
		extra: "  drift: Warn\n"}.yaml()})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(*e.instanceCR(e.ns, "web").Status.Published).To(Equal(first))

	// Publish registry down: the changed render is not applied, nothing is lost.
	pub.Stop()
	repo.commit("change while down", map[string]string{"instances/web.yaml": inst{name: "web", ns: e.ns, replicas: 1,
		configs: configs("a", "b")}.yaml()})
	res = e.sync(repo)
	got := result(res, e.ns, "web")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonPublishFailed))
	e.g.Expect(got.Retry).To(Equal(outcome.Transient))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-b")).To(BeNil(), "an unpublished render was applied")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-a")).NotTo(BeNil())
	mi = e.instanceCR(e.ns, "web")
	e.g.Expect(*mi.Status.Published).To(Equal(first))

	// Back up (same port, same storage): the next sync publishes and applies.
	restartRegistry(t, pub)
	e.g.Eventually(func() bool {
		res := e.sync(repo)
		return result(res, e.ns, "web").Ready
	}, time.Minute, 2*time.Second).Should(BeTrue())
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-b")).NotTo(BeNil())
	e.g.Expect(e.instanceCR(e.ns, "web").Status.Published.Digest).NotTo(Equal(first.Digest))
	e.logEverything()
}

func isReadyCond(conds []metav1Condition) bool {
	for _, c := range conds {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func readyReason(conds []metav1Condition) string {
	for _, c := range conds {
		if c.Type == "Ready" {
			return c.Reason
		}
	}
	return ""
}

// changedCopy copies a module directory and adds a comment to one file, so that the
// copy publishes as different content.
func changedCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	files := copyDir(t, dir, "")
	first := ""
	for name := range files {
		if strings.HasSuffix(name, ".cue") && !strings.Contains(name, "cue.mod") && (first == "" || name < first) {
			first = name
		}
	}
	files[first] += "\n// changed\n"
	for name, content := range files {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

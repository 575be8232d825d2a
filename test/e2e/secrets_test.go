package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// generatedSecrets declares, under spec, the Secrets of the first tests: a once
// Secret with one key per encoding, a Secret that is not once, and a certificate.
func generatedSecrets(ns string, dbLength, apiLength int) string {
	return fmt.Sprintf(`  secrets:
    - name: db
      once: true
      data:
        password: {random: {length: %d}}
        token: {random: {length: 21, encoding: hex}}
        key: {random: {length: 43, encoding: base64}}
    - name: api
      data:
        key: {random: {length: %d}}
    - name: web-tls
      tls: {commonName: web.%s.svc, dnsNames: [web, web.%s.svc], validFor: 48h}
`, dbLength, apiLength, ns, ns)
}

// TestGeneratedSecretsKeepTheirValues: spec.secrets creates the Secrets with values
// of the declared lengths and alphabets and a certificate whose chain verifies; no
// re-sync, values change, re-created CR or restart generates them again; a generator
// change regenerates only the Secret that is not once; no value appears anywhere.
func TestGeneratedSecretsKeepTheirValues(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"), extra: generatedSecrets(e.ns, 32, 16)}
	repo := newGitRepo(t, appRepo("", a))
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(r.Message).To(ContainSubstring("generated Secrets: db created, api created, web-tls created"))

	db, api := e.secret(e.ns, "db"), e.secret(e.ns, "api")
	e.g.Expect(db.Type).To(Equal(corev1.SecretTypeOpaque))
	e.g.Expect(string(db.Data["password"])).To(MatchRegexp(`^[A-Za-z0-9]{32}$`))
	e.g.Expect(string(db.Data["token"])).To(MatchRegexp(`^[0-9a-f]{21}$`))
	e.g.Expect(string(db.Data["key"])).To(MatchRegexp(`^[A-Za-z0-9+/]{43}$`))
	e.g.Expect(string(api.Data["key"])).To(MatchRegexp(`^[A-Za-z0-9]{16}$`))
	mi := e.instance(e.ns, "a")
	e.g.Expect(db.Labels).To(Equal(map[string]string{cairnv1.ManagedByLabel: "cairn", cairnv1.InstanceLabel: e.ns + ".a",
		cairnv1.InstanceUIDLabel: string(mi.UID), cairnv1.GeneratedLabel: "true"}))
	at, err := time.Parse(time.RFC3339, db.Annotations[cairnv1.GeneratedAtAnnotation])
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(at).To(BeTemporally("~", time.Now(), time.Minute))
	e.g.Expect(e.inventoryEntries(e.ns, "a")).To(ContainElements(
		HaveField("ID", e.ns+"_db__Secret"), HaveField("ID", e.ns+"_api__Secret"), HaveField("ID", e.ns+"_web-tls__Secret")))
	cert := e.expectCertificate(e.secret(e.ns, "web-tls"), "web."+e.ns+".svc", "web")
	e.g.Expect(cert.Subject.CommonName).To(Equal("web." + e.ns + ".svc"))
	e.g.Expect(cert.NotAfter).To(BeTemporally("~", time.Now().Add(48*time.Hour), time.Minute), "validFor")

	values := e.secretValues("db", "api", "web-tls")
	e.expectNoValue(res, values)

	// A re-sync of the same commit, and one of a values change, keep every value.
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Action).To(BeEquivalentTo("Unchanged"))
	a.replicas = 1
	repo.commit("scale", map[string]string{"instances/a.yaml": a.yaml()})
	res = e.sync(repo)
	r = result(res, e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Updated"), r.Message)
	e.g.Expect(r.Message).To(ContainSubstring("db kept, api kept, web-tls kept"))
	e.g.Expect(e.secretValues("db", "api", "web-tls")).To(Equal(values))

	// The CR deleted by hand and a fresh engine (a restart): the next sync re-creates
	// the CR and adopts the Secrets with their values.
	e.g.Expect(e.c.Delete(e.ctx, e.instance(e.ns, "a"))).To(Succeed())
	e.g.Eventually(func() *cairnv1.ModuleInstance { return e.instance(e.ns, "a") }).Should(BeNil())
	logs := e.restartEngine()
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "a").Ready).To(BeTrue(), result(res, e.ns, "a").Message)
	e.g.Expect(e.secretValues("db", "api", "web-tls")).To(Equal(values))
	e.g.Expect(e.secret(e.ns, "db").Labels[cairnv1.InstanceUIDLabel]).To(Equal(string(e.instance(e.ns, "a").UID)))

	// A generator change: the once Secret keeps its values, the other is generated again.
	a.extra = generatedSecrets(e.ns, 40, 24)
	repo.commit("longer keys", map[string]string{"instances/a.yaml": a.yaml()})
	res = e.sync(repo)
	r = result(res, e.ns, "a")
	e.g.Expect(r.Message).To(ContainSubstring("db kept, api rotated, web-tls kept"))
	e.g.Expect(e.secretValues("db")).To(Equal(pick(values, "db")))
	e.g.Expect(string(e.secret(e.ns, "api").Data["key"])).To(MatchRegexp(`^[A-Za-z0-9]{24}$`))
	e.expectNoValue(res, e.secretValues("db", "api", "web-tls"))
	e.g.Expect(logs.String()).To(ContainSubstring(`"secret"="` + e.ns + `/api" "action"="rotate"`))
	for _, v := range append(needles(values), needles(e.secretValues("api"))...) {
		e.g.Expect(logs.String()).NotTo(ContainSubstring(v))
	}
}

// TestGeneratedSecretRotateAfter: a Secret whose cairn.dev/generated-at is older
// than rotateAfter is replaced by the next drift check or sync, with no Git change;
// a younger one is not; its once sibling is never touched. The plan says create,
// keep or rotate and shows no value.
func TestGeneratedSecretRotateAfter(t *testing.T) {
	e := newEnv(t)
	secrets := `  secrets:
    - name: rot
      rotateAfter: 1h
      data: {key: {random: {length: 20}}}
    - name: sib
      once: true
      data: {key: {random: {length: 20}}}
    - name: rot-tls
      rotateAfter: 1h
      tls: {commonName: rot.example.svc}
`
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: secrets}
	repo := newGitRepo(t, appRepo("", a))
	plan := e.plan(repo)
	e.g.Expect(plan.Instances[0].Secrets).To(ConsistOf(
		secretPlan("Secret/"+e.ns+"/rot", "create"), secretPlan("Secret/"+e.ns+"/sib", "create"),
		secretPlan("Secret/"+e.ns+"/rot-tls", "create")))
	e.syncClean(repo)
	before := e.secretValues("rot", "sib", "rot-tls")

	// Not due: neither a drift check nor a sync replaces anything.
	rep := e.driftReport(repo, "a")
	e.g.Expect(rep.Rotated).To(BeEmpty())
	e.g.Expect(e.secretValues("rot", "sib", "rot-tls")).To(Equal(before))
	e.g.Expect(e.plan(repo).Instances[0].Secrets).To(HaveEach(HaveField("Action", "keep")))

	// Due: the plan says rotate, the drift check replaces rot and rot-tls only.
	e.ageSecret("rot", 2*time.Hour)
	e.ageSecret("rot-tls", 2*time.Hour)
	plan = e.plan(repo)
	e.g.Expect(plan.Instances[0].Secrets).To(ConsistOf(
		secretPlan("Secret/"+e.ns+"/rot", "rotate"), secretPlan("Secret/"+e.ns+"/sib", "keep"),
		secretPlan("Secret/"+e.ns+"/rot-tls", "rotate")))
	e.g.Expect(plan.Markdown()).To(ContainSubstring("Generated secret: **rotate** `Secret/" + e.ns + "/rot`"))
	rep = e.driftReport(repo, "a")
	e.g.Expect(rep.Err).NotTo(HaveOccurred())
	e.g.Expect(rep.Rotated).To(ConsistOf("Secret/"+e.ns+"/rot", "Secret/"+e.ns+"/rot-tls"))
	after := e.secretValues("rot", "sib", "rot-tls")
	e.g.Expect(after["sib"]).To(Equal(before["sib"]))
	e.g.Expect(after["rot"]["key"]).NotTo(Equal(before["rot"]["key"]))
	e.g.Expect(after["rot-tls"]["tls.key"]).NotTo(Equal(before["rot-tls"]["tls.key"]))
	e.expectCertificate(e.secret(e.ns, "rot-tls"), "rot.example.svc")
	at, _ := time.Parse(time.RFC3339, e.secret(e.ns, "rot").Annotations[cairnv1.GeneratedAtAnnotation])
	e.g.Expect(at).To(BeTemporally("~", time.Now(), time.Minute))

	// A sync of the same commit rotates too.
	e.ageSecret("rot", 3*time.Hour)
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(r.Message).To(ContainSubstring("generated Secrets: rot rotated"))
	latest := e.secretValues("rot", "sib", "rot-tls")
	e.g.Expect(latest["rot"]).NotTo(Equal(after["rot"]))
	e.g.Expect(latest["sib"]).To(Equal(before["sib"]))
	e.g.Expect(latest["rot-tls"]).To(Equal(after["rot-tls"]))

	for _, v := range []map[string]map[string]string{before, after, latest} {
		e.expectNoValue(res, v)
		e.expectNotInPlan(plan, v)
	}
}

// TestGeneratedSecretCopies: toNamespaces copies hold the values of the original; a
// copy deleted by hand comes back with them; a denied namespace is a typed error
// and writes nothing; a copy that leaves the declaration, and every Secret of an
// instance that leaves Git, is pruned.
func TestGeneratedSecretCopies(t *testing.T) {
	e := newEnv(t)
	b, c := e.ns+"-b", e.ns+"-c"
	e.createNamespaces(b, c)
	copies := func(namespaces ...string) string {
		return "  secrets:\n    - name: shared\n      once: true\n      data: {key: {random: {length: 24}}}\n" +
			"      toNamespaces: [" + strings.Join(namespaces, ", ") + "]\n"
	}
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: copies(b, c)}
	other := inst{name: "other", ns: e.ns, replicas: 0}
	repo := newGitRepo(t, appRepo("", a, other))
	e.syncClean(repo)
	original := e.secret(e.ns, "shared")
	for _, ns := range []string{b, c} {
		cp := e.secret(ns, "shared")
		e.g.Expect(cp.Data).To(Equal(original.Data))
		e.g.Expect(cp.Annotations[cairnv1.CopiedFromAnnotation]).To(Equal(e.ns + "/shared"))
		e.g.Expect(cp.Labels[cairnv1.InstanceLabel]).To(Equal(e.ns + ".a"))
	}

	e.g.Expect(e.c.Delete(e.ctx, e.secret(c, "shared"))).To(Succeed())
	rep := e.driftReport(repo, "a")
	e.g.Expect(rep.Drifted).To(ContainElement("Secret/" + c + "/shared"))
	e.g.Expect(e.secret(c, "shared").Data).To(Equal(original.Data))

	// A denied namespace: the declaration is refused, nothing is written.
	a.extra = copies(b, c, "kube-public")
	repo.commit("copy to kube-public", map[string]string{"instances/a.yaml": a.yaml()})
	res := e.sync(repo)
	r := result(res, e.ns, "a")
	e.g.Expect(r.Reason).To(Equal(cairnv1.ReasonNamespaceDenied))
	e.g.Expect(r.Message).To(And(ContainSubstring("instances/a.yaml"), ContainSubstring("spec.secrets[0].toNamespaces[2]"),
		ContainSubstring(`"kube-public" is denied`)))
	mi := e.instance(e.ns, "a")
	e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(cairnv1.ReasonNamespaceDenied))
	e.g.Expect(e.secret("kube-public", "shared")).To(BeNil())
	e.g.Expect(e.secret(e.ns, "shared").ResourceVersion).To(Equal(original.ResourceVersion))

	// A copy leaves the declaration: it is pruned, the others stay.
	a.extra = copies(b)
	repo.commit("one copy", map[string]string{"instances/a.yaml": a.yaml()})
	r = result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(r.Pruned).To(Equal(1))
	e.g.Expect(e.gone("v1", "Secret", c, "shared")).To(BeTrue())
	e.g.Expect(e.secret(b, "shared").Data).To(Equal(original.Data))

	// The instance leaves Git: the original and its copy go with it.
	repo.commit("remove a", map[string]string{"instances/a.yaml": ""})
	r = result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Deleted"), r.Message)
	e.g.Expect(e.gone("v1", "Secret", e.ns, "shared")).To(BeTrue())
	e.g.Expect(e.gone("v1", "Secret", b, "shared")).To(BeTrue())
}

// TestGeneratedSecretDriftWarn: under drift: Warn a copy deleted by hand is reported
// (Drifted condition) and not re-created; a rotation that is due still happens.
func TestGeneratedSecretDriftWarn(t *testing.T) {
	e := newEnv(t)
	b := e.ns + "-b"
	e.createNamespaces(b)
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: "  drift: Warn\n  secrets:\n    - name: s\n      rotateAfter: 1h\n" +
		"      data: {key: {random: {length: 12}}}\n      toNamespaces: [" + b + "]\n"}
	repo := newGitRepo(t, appRepo("", a))
	e.syncClean(repo)
	e.g.Expect(e.c.Delete(e.ctx, e.secret(b, "s"))).To(Succeed())
	rep := e.driftReport(repo, "a")
	e.g.Expect(rep.Err).NotTo(HaveOccurred())
	e.g.Expect(rep.Drifted).To(ConsistOf("Secret/" + b + "/s"))
	e.g.Expect(rep.Corrected).To(Equal(0))
	e.g.Expect(e.secret(b, "s")).To(BeNil())
	mi := e.instance(e.ns, "a")
	e.g.Expect(conditions.IsTrue(mi, cairnv1.DriftedCondition)).To(BeTrue())
	e.g.Expect(conditions.GetMessage(mi, cairnv1.DriftedCondition)).To(ContainSubstring("Secret/" + b + "/s"))

	before := e.secretValues("s")
	e.ageSecret("s", 2*time.Hour)
	rep = e.driftReport(repo, "a")
	e.g.Expect(rep.Rotated).To(ConsistOf("Secret/"+e.ns+"/s", "Secret/"+b+"/s"))
	e.g.Expect(e.secretValues("s")).NotTo(Equal(before))
	e.g.Expect(e.secret(b, "s").Data).To(Equal(e.secret(e.ns, "s").Data), "the rotation writes the copy too")
}

// TestGeneratedSecretsAreWrittenAfterTheRender: a render that fails its dry-run
// writes no generated Secret either; a copy may go to a namespace the render itself
// creates.
func TestGeneratedSecretsAreWrittenAfterTheRender(t *testing.T) {
	e := newEnv(t)
	d := e.ns + "-d"
	e.deleteNamespacesAtEnd(d)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x"),
		extra: "  secrets:\n    - name: s\n      data: {key: {random: {length: 12}}}\n      toNamespaces: [" + d + "]\n"}
	withValues := func(values string) string { return replaceOnce(a.yaml(), "    configs:\n", values+"    configs:\n") }
	repo := newGitRepo(t, appRepo("", a))
	repo.commit("bad service", map[string]string{"instances/a.yaml": withValues("    badService: true\n    namespaces: [" + d + "]\n")})
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(r.Message).To(ContainSubstring("Service/" + e.ns + "/a-bad"))
	e.g.Expect(e.secret(e.ns, "s")).To(BeNil(), "nothing is written when the dry-run fails")
	e.g.Expect(e.configMap(e.ns, "a-x")).To(BeNil())

	repo.commit("good", map[string]string{"instances/a.yaml": withValues("    namespaces: [" + d + "]\n")})
	r = result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(e.secret(d, "s").Data).To(Equal(e.secret(e.ns, "s").Data))
}

// TestGeneratedSecretsAreWrittenAsTheInstanceIdentity: the Secrets are written as
// the instance's ServiceAccount, so a copy into a namespace it may not write is
// forbidden, naming that identity.
func TestGeneratedSecretsAreWrittenAsTheInstanceIdentity(t *testing.T) {
	e := newEnv(t)
	b := e.ns + "-b"
	e.createNamespaces(e.ns, b)
	e.grantDeployer()
	a := inst{name: "a", ns: e.ns, replicas: 0, extra: "  serviceAccountName: deployer\n" +
		"  secrets:\n    - name: s\n      data: {key: {random: {length: 8}}}\n      toNamespaces: [" + b + "]\n"}
	repo := newGitRepo(t, appRepo("", a))
	e.expectFailure(e.sync(repo), wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed,
		contains: []string{"Secret/" + b + "/s", "forbidden", `User "system:serviceaccount:{ns}:deployer"`}})
	e.g.Expect(e.secret(b, "s")).To(BeNil())
	e.g.Expect(e.secret(e.ns, "s")).To(BeNil(), "read before anything is written: the read in "+b+" is forbidden too")
}

// secretClashModule renders a ConfigMap and, when values.secret is set, a Secret of
// that name.
const secretClashModule = `package custom

instance: {name: string, namespace: string}
values: {secret: *"" | string}
objects: {
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-cm"}
	if values.secret != "" {
		secret: {apiVersion: "v1", kind: "Secret", metadata: name: values.secret, stringData: k: "rendered"}
	}
}
`

// TestGeneratedSecretNameClash: a rendered Secret of a generated Secret's name, and
// a Secret that exists and is not the instance's, are errors naming both; nothing is
// written and the foreign Secret keeps its data.
func TestGeneratedSecretNameClash(t *testing.T) {
	e := newEnv(t)
	files := appRepo("")
	files["modules/custom/main.cue"] = secretClashModule
	files["instances/mod.yaml"] = localInstanceYAML("mod", e.ns, "./modules/custom", "{secret: creds}") +
		"  secrets:\n    - name: creds\n      data: {key: {random: {length: 8}}}\n"
	repo := newGitRepo(t, files)
	e.expectFailure(e.sync(repo), wantFailure{name: "mod", reason: cairnv1.ReasonSecretConflict,
		contains: []string{"Secret/{ns}/creds is generated by spec.secrets[0] (creds)", "rendered by the module as Secret/{ns}/creds"}})
	e.g.Expect(e.configMap(e.ns, "mod-cm")).To(BeNil())
	e.g.Expect(e.secret(e.ns, "creds")).To(BeNil())

	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "taken"}, Data: map[string][]byte{"key": []byte("theirs")}}
	e.g.Expect(e.c.Create(e.ctx, foreign)).To(Succeed())
	repo.commit("generate taken", map[string]string{"instances/mod.yaml": localInstanceYAML("mod", e.ns, "./modules/custom", "{}") +
		"  secrets:\n    - name: taken\n      data: {key: {random: {length: 8}}}\n"})
	e.expectFailure(e.sync(repo), wantFailure{name: "mod", reason: cairnv1.ReasonSecretConflict,
		contains: []string{"Secret/{ns}/taken (spec.secrets[0]) exists and was not generated by this instance"}})
	e.g.Expect(string(e.secret(e.ns, "taken").Data["key"])).To(Equal("theirs"))
	e.g.Expect(e.configMap(e.ns, "mod-cm")).To(BeNil())
}

// TestGeneratedSecretsAreNotPublished: the signed artifact of a render (Platform
// render.publish) holds the rendered objects only: no generated Secret, no value.
func TestGeneratedSecretsAreNotPublished(t *testing.T) {
	e := newEnv(t)
	pub := startRegistry(t, true, false)
	keys := newKeyPair(t)
	e.putCairnSecret("pub-creds-"+e.ns, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	files := appRepo("  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n",
		inst{name: "web", ns: e.ns, replicas: 0, configs: configs("a"), extra: generatedSecrets(e.ns, 32, 16)})
	files["registries.yaml"] = registryYAML("rendered", pub.Host, true,
		"  secretRef: {name: pub-creds-"+e.ns+"}\n  signing:\n    keySecretRef: {name: signing-"+e.ns+"}\n")
	res := e.sync(newGitRepo(t, files))
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	mi := e.instanceCR(e.ns, "web")
	e.g.Expect(mi.Status.Published).NotTo(BeNil())
	pulled, _, err := registryClient(t, pub, true).PullArtifact(e.ctx, "rendered/cluster/"+e.ns+"/web",
		digestOf(mi.Status.Published.Digest))
	e.g.Expect(err).NotTo(HaveOccurred())
	objects := string(pulled[0].Data)
	e.g.Expect(objects).To(ContainSubstring("name: web-a"))
	e.g.Expect(objects).NotTo(ContainSubstring("kind: Secret"))
	for _, v := range needles(e.secretValues("db", "api", "web-tls")) {
		e.g.Expect(objects).NotTo(ContainSubstring(v))
	}
}

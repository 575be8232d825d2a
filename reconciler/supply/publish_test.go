package supply

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/sign"
)

// TestPublishedObjectsCarryNoSecretData: the artifact of a render keeps every object
// but never a Secret's values, nor the instance UID.
func TestPublishedObjectsCarryNoSecretData(t *testing.T) {
	g := NewWithT(t)
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db", "labels": map[string]any{cairnv1.InstanceUIDLabel: "uid-123", "app": "db"}},
		"data":       map[string]any{"password": "c3VwZXItc2VjcmV0"},
		"stringData": map[string]any{"token": "plain-token-value"},
	}}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cfg"},
		"data":     map[string]any{"password": "not-a-secret-here"},
	}}
	out, err := objectsYAML([]*unstructured.Unstructured{secret, cm})
	g.Expect(err).NotTo(HaveOccurred())
	text := string(out)
	for _, leaked := range []string{"c3VwZXItc2VjcmV0", "plain-token-value", "uid-123"} {
		g.Expect(text).NotTo(ContainSubstring(leaked), "the artifact carries %q", leaked)
	}
	for _, kept := range []string{"password: <redacted>", "token: <redacted>", "app: db", "not-a-secret-here", "---"} {
		g.Expect(text).To(ContainSubstring(kept), "the artifact lost %q", kept)
	}
	g.Expect(secret.Object["data"].(map[string]any)["password"]).To(Equal("c3VwZXItc2VjcmV0"), "redaction changed the object to be applied")
}

// publication is the render of team-a/web with one Secret.
func publication() Publication {
	return Publication{
		Registry: "out", Repository: "/renders/", Namespace: "team-a", Name: "web",
		Objects: []*unstructured.Unstructured{{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
			"data": map[string]any{"password": "c3VwZXItc2VjcmV0"},
		}}},
		RenderDigest: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		Revision:     "abc123", Source: "https://git.example/platform.git",
	}
}

// TestPublish: a render is pushed once, tagged by its render digest, signed with the
// Registry's key and annotated with where it comes from; an artifact already there
// is not pushed again, and signed when it lacks a signature.
func TestPublish(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	host, c := testRegistry(t)
	privPEM, pubPEM, key := testKey(t)
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{
		"signing": secret("signing", map[string]string{"cosign.key": string(privPEM), "cosign.password": "pw"}),
	}}
	pub, err := sign.LoadPublicKey(pubPEM)
	g.Expect(err).NotTo(HaveOccurred())
	regs := []*cairnv1.Registry{registryOf("out", host, withSigning("signing"))}
	p := publication()
	const repo = "renders/team-a/web"
	const tag = "sha256-1111111111111111111111111111111111111111111111111111111111111111"

	// An identical artifact pushed unsigned: publish finds it and signs it.
	data, err := objectsYAML(p.Objects)
	g.Expect(err).NotTo(HaveOccurred())
	pre, _, err := c.PushArtifact(ctx, repo, tag, RenderArtifactType,
		[]sign.File{{Name: RenderObjectsFile, MediaType: RenderObjectsMedia, Data: data}},
		map[string]string{annotationRevision: "abc123", annotationSource: p.Source, annotationInstance: "team-a/web", annotationRenderDig: p.RenderDigest})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Verify(ctx, repo, pre.Digest, []*sign.PublicKey{pub})
	g.Expect(err).To(HaveOccurred())

	got, f := New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, regs).Publish(ctx, p)
	g.Expect(f).To(BeNil())
	g.Expect(got).To(Equal(Published{Ref: host + "/" + repo + ":" + tag, Digest: pre.Digest.String(), KeyID: pub.ID(), Existed: true}))
	_, err = c.Verify(ctx, repo, pre.Digest, []*sign.PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())

	// Other content under a render's tag (pushed by anyone with the Registry's
	// credentials, a render Job's pod among them) is never signed: it is replaced
	// by the render, which is.
	p.RenderDigest = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	forged := strings.ReplaceAll(p.RenderDigest, ":", "-")
	planted, _, err := c.PushArtifact(ctx, repo, forged, RenderArtifactType,
		[]sign.File{{Name: RenderObjectsFile, MediaType: RenderObjectsMedia, Data: []byte("kind: ClusterRoleBinding\n")}},
		map[string]string{annotationInstance: "team-a/web", annotationRenderDig: p.RenderDigest})
	g.Expect(err).NotTo(HaveOccurred())
	got, f = New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, regs).Publish(ctx, p)
	g.Expect(f).To(BeNil())
	g.Expect(got.Existed).To(BeFalse())
	g.Expect(got.Digest).NotTo(Equal(planted.Digest.String()))
	_, err = c.Verify(ctx, repo, planted.Digest, []*sign.PublicKey{pub})
	g.Expect(err).To(HaveOccurred(), "the planted content is not signed")
	files, _, err := c.PullArtifact(ctx, repo, digest.Digest(got.Digest))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files[0].Data).To(Equal(data), "the tag holds the render")

	// A new render is pushed and signed, and published once.
	p.RenderDigest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	p.Revision = "def456"
	sc := New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, regs)
	got, f = sc.Publish(ctx, p)
	g.Expect(f).To(BeNil())
	g.Expect(got.Existed).To(BeFalse())
	g.Expect(got.Ref).To(Equal(host + "/" + repo + ":sha256-2222222222222222222222222222222222222222222222222222222222222222"))
	files, annotations, err := c.PullArtifact(ctx, repo, digest.Digest(got.Digest))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(1))
	g.Expect(files[0].Name).To(Equal(RenderObjectsFile))
	g.Expect(string(files[0].Data)).To(ContainSubstring("password: <redacted>"))
	g.Expect(string(files[0].Data)).NotTo(ContainSubstring("c3VwZXItc2VjcmV0"))
	g.Expect(annotations).To(HaveKeyWithValue(annotationRevision, "def456"))
	g.Expect(annotations).To(HaveKeyWithValue(annotationSource, p.Source))
	g.Expect(annotations).To(HaveKeyWithValue(annotationInstance, "team-a/web"))
	g.Expect(annotations).To(HaveKeyWithValue(annotationRenderDig, p.RenderDigest))
	result, err := c.Verify(ctx, repo, digest.Digest(got.Digest), []*sign.PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(result.KeyID).To(Equal(key.Public().ID()))
	again, f := sc.Publish(ctx, p)
	g.Expect(f).To(BeNil())
	g.Expect(again).To(Equal(Published{Ref: got.Ref, Digest: got.Digest, KeyID: key.Public().ID(), Existed: true}))
}

// TestPublishFailures: what keeps a render from being published fails it, typed,
// without the signing key's password or the Secret's data in the message.
func TestPublishFailures(t *testing.T) {
	ctx := context.Background()
	host, _ := testRegistry(t)
	privPEM, _, _ := testKey(t)
	down := httptest.NewServer(nil)
	downHost := strings.TrimPrefix(down.URL, "http://")
	down.Close()
	const password = "the-wrong-password"
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{
		"signing":  secret("signing", map[string]string{"cosign.key": string(privPEM), "cosign.password": "pw"}),
		"wrong":    secret("wrong", map[string]string{"cosign.key": string(privPEM), "cosign.password": password}),
		"nokey":    secret("nokey", map[string]string{"cosign.password": password}),
		"garbage":  secret("garbage", map[string]string{"cosign.key": password}),
		"badcreds": secret("badcreds", map[string]string{"token": password}),
	}}
	for _, tc := range []struct {
		name    string
		reg     *cairnv1.Registry
		kind    outcome.Kind
		reason  string
		message string
	}{
		{name: "publish Registry not declared", reg: registryOf("other", host),
			kind: outcome.Stalled, reason: cairnv1.ReasonPublishFailed, message: "publish Registry out is not declared"},
		{name: "Registry unusable", reg: registryOf("out", host, withSecret("badcreds"), withSigning("signing")),
			kind: outcome.Stalled, reason: cairnv1.ReasonUnsupportedSecret, message: "Registry out: Secret badcreds:"},
		{name: "no signing key", reg: registryOf("out", host),
			kind: outcome.Stalled, reason: cairnv1.ReasonPublishFailed, message: "Registry out has no signing key (spec.signing.keySecretRef)"},
		{name: "signing Secret not found", reg: registryOf("out", host, withSigning("gone")),
			kind: outcome.Transient, reason: cairnv1.ReasonRegistryNotReady, message: "Registry out: Secret gone not found in cairn's namespace"},
		{name: "no cosign.key", reg: registryOf("out", host, withSigning("nokey")),
			kind: outcome.Stalled, reason: cairnv1.ReasonPublishFailed, message: "Registry out: Secret nokey has no cosign.key"},
		{name: "wrong password", reg: registryOf("out", host, withSigning("wrong")),
			kind: outcome.Stalled, reason: cairnv1.ReasonPublishFailed, message: "Registry out: Secret wrong: the signing key cannot be loaded (wrong cosign.password?)"},
		{name: "not a key", reg: registryOf("out", host, withSigning("garbage")),
			kind: outcome.Stalled, reason: cairnv1.ReasonPublishFailed, message: "Registry out: Secret garbage: the signing key cannot be loaded"},
		{name: "registry down", reg: registryOf("out", downHost, withSigning("signing")),
			kind: outcome.Transient, reason: cairnv1.ReasonPublishFailed, message: "failed to publish " + downHost + "/renders/team-a/web:sha256-1111"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sc := New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, []*cairnv1.Registry{tc.reg})
			got, f := sc.Publish(ctx, publication())
			g.Expect(got).To(BeZero())
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Kind).To(Equal(tc.kind))
			g.Expect(f.Reason).To(Equal(tc.reason))
			g.Expect(f.Error()).To(HavePrefix(tc.message))
			g.Expect(f.Error()).NotTo(ContainSubstring(password))
			g.Expect(f.Error()).NotTo(ContainSubstring("PRIVATE KEY"))
		})
	}
}

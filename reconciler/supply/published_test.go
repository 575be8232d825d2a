package supply

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/sign"
)

// TestPullPublished: a published render comes back as published (its Secrets
// redacted) once its signature verifies under the publish Registry's key; one
// signed by another key, one never signed, and one signed that says it is another
// render are refused, naming why.
func TestPullPublished(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	host, c := testRegistry(t)
	privPEM, _, _ := testKey(t)
	otherPEM, _, err := sign.GenerateKeyPair([]byte("other"))
	g.Expect(err).NotTo(HaveOccurred())
	otherKey, err := sign.LoadPrivateKey(otherPEM, []byte("other"))
	g.Expect(err).NotTo(HaveOccurred())
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{
		"signing": secret("signing", map[string]string{"cosign.key": string(privPEM), "cosign.password": "pw"}),
	}}
	regs := []*cairnv1.Registry{registryOf("out", host, withSigning("signing"))}
	p := publication()
	sc := New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, regs)
	published, f := sc.Publish(ctx, p)
	g.Expect(f).To(BeNil())
	release := Release{Registry: "out", Repository: p.Repository, Namespace: p.Namespace, Name: p.Name,
		Digest: published.Digest, RenderDigest: p.RenderDigest}

	objects, f := sc.PullPublished(ctx, release)
	g.Expect(f).To(BeNil())
	g.Expect(objects).To(HaveLen(len(p.Objects)))
	for i, u := range objects {
		g.Expect(u.GetKind()).To(Equal(p.Objects[i].GetKind()))
		g.Expect(u.GetName()).To(Equal(p.Objects[i].GetName()))
		if u.GetKind() == "Secret" {
			g.Expect(u.Object["data"]).To(HaveKeyWithValue("password", "<redacted>"), "published without Secret data")
		}
	}

	repo := instanceRepository(p.Repository, p.Namespace, p.Name)
	data, err := objectsYAML(p.Objects)
	g.Expect(err).NotTo(HaveOccurred())
	push := func(tag string, ann map[string]string) digest.Digest {
		planted := append(append([]byte{}, data...), []byte("---\nkind: ClusterRoleBinding\nmetadata: {name: "+tag+"}\n")...)
		desc, _, err := c.PushArtifact(ctx, repo, tag, RenderArtifactType,
			[]sign.File{{Name: RenderObjectsFile, MediaType: RenderObjectsMedia, Data: planted}}, ann)
		g.Expect(err).NotTo(HaveOccurred())
		return desc.Digest
	}
	ann := map[string]string{annotationInstance: p.Namespace + "/" + p.Name, annotationRenderDig: p.RenderDigest}
	unsigned := push("unsigned", ann)
	resigned := push("resigned", ann)
	g.Expect(c.Sign(ctx, repo, resigned, otherKey)).To(Succeed())
	for name, d := range map[string]digest.Digest{"never signed": unsigned, "signed by another key": resigned} {
		r := release
		r.Digest = d.String()
		_, f := sc.PullPublished(ctx, r)
		g.Expect(f).NotTo(BeNil(), name)
		g.Expect(f.Reason).To(Equal(cairnv1.ReasonSignatureInvalid), name)
		g.Expect(f.Error()).To(ContainSubstring("does not verify under Registry out's key"), name)
	}
	other := release
	other.RenderDigest = "sha256:9999999999999999999999999999999999999999999999999999999999999999"
	_, f = sc.PullPublished(ctx, other)
	g.Expect(f).NotTo(BeNil())
	g.Expect(f.Error()).To(ContainSubstring("is not the render"))
}

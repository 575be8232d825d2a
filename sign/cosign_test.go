package sign

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

func TestSignVerify(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	key, pub := testKey(t, 0)
	_, otherPub := testKey(t, 1)
	desc, _, err := c.PushChart(ctx, "charts/podinfo", chartArchive(t, "podinfo", "1.0.0"))
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.Verify(ctx, "charts/podinfo", desc.Digest, []*PublicKey{pub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureMissing), "unsigned: %v", err)

	g.Expect(c.Sign(ctx, "charts/podinfo", desc.Digest, key)).To(Succeed())
	res, err := c.Verify(ctx, "charts/podinfo", desc.Digest, []*PublicKey{otherPub, pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(Result{Digest: desc.Digest, Verified: true, KeyID: pub.ID(), Signatures: 1}))

	res, err = c.Verify(ctx, "charts/podinfo", desc.Digest, []*PublicKey{otherPub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))
	g.Expect(err.Error()).To(ContainSubstring("signed, but not by any of the 1 trusted keys"))
	g.Expect(err.Error()).To(ContainSubstring(c.Host() + "/charts/podinfo@" + desc.Digest.String()))
	g.Expect(res.Verified).To(BeFalse())

	_, err = c.Verify(ctx, "charts/podinfo", desc.Digest, nil)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidKey))
}

func TestSignKeepsOtherSignaturesAndIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	key1, pub1 := testKey(t, 0)
	key2, pub2 := testKey(t, 1)
	desc := pushFiles(t, c, "rendered/x", "v1", "content")

	g.Expect(c.Sign(ctx, "rendered/x", desc.Digest, key1)).To(Succeed())
	g.Expect(c.Sign(ctx, "rendered/x", desc.Digest, key2)).To(Succeed())
	g.Expect(c.Sign(ctx, "rendered/x", desc.Digest, key1)).To(Succeed())

	for _, pub := range []*PublicKey{pub1, pub2} {
		res, err := c.Verify(ctx, "rendered/x", desc.Digest, []*PublicKey{pub})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.KeyID).To(Equal(pub.ID()))
		g.Expect(res.Signatures).To(Equal(2), "signing again with key1 added nothing")
	}
}

func TestSignUnknownDigest(t *testing.T) {
	g := NewWithT(t)
	c := newTestRegistry(t, nil).client(t, nil)
	key, _ := testKey(t, 0)
	err := c.Sign(context.Background(), "rendered/x", digest.FromString("nothing"), key)
	g.Expect(Reason(err)).To(Equal(ReasonNotFound))
}

// copySignatures puts the signature manifest of from under the signature tag of to.
func copySignatures(t *testing.T, c *Client, repo string, from, to digest.Digest) {
	t.Helper()
	ctx := context.Background()
	sigDesc, err := c.Resolve(ctx, repo, SignatureTag(from))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.FetchManifest(ctx, repo, sigDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.repository(repo)
	if err := c.pushManifest(ctx, r, repo, nil, blob{desc: sigDesc, data: raw}, SignatureTag(to)); err != nil {
		t.Fatal(err)
	}
}

func TestSignatureOfAnotherDigest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	key, pub := testKey(t, 0)
	a := pushFiles(t, c, "rendered/x", "a", "A")
	b := pushFiles(t, c, "rendered/x", "b", "B")
	g.Expect(c.Sign(ctx, "rendered/x", b.Digest, key)).To(Succeed())
	copySignatures(t, c, "rendered/x", b.Digest, a.Digest)

	_, err := c.Verify(ctx, "rendered/x", a.Digest, []*PublicKey{pub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))
	g.Expect(err.Error()).To(ContainSubstring("payload names another digest"))
}

func TestTooManySignatureLayers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	key, pub := testKey(t, 0)
	desc := pushFiles(t, c, "rendered/x", "v1", "content")
	layer, err := c.signatureLayer("rendered/x", desc.Digest, key)
	g.Expect(err).NotTo(HaveOccurred())
	layers := make([]ocispec.Descriptor, 200)
	for i := range layers {
		layers[i] = layer.desc
	}
	r, _ := c.repository("rendered/x")
	config, err := signatureConfig(layers)
	g.Expect(err).NotTo(HaveOccurred())
	manifest, err := marshalManifest(ocispec.Manifest{Versioned: specsV2, MediaType: ocispec.MediaTypeImageManifest,
		Config: config.desc, Layers: layers})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.pushManifest(ctx, r, "rendered/x", []blob{config, layer}, manifest, SignatureTag(desc.Digest))).To(Succeed())

	before := reg.requests.Load()
	start := time.Now()
	_, err = c.Verify(ctx, "rendered/x", desc.Digest, []*PublicKey{pub})
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))
	g.Expect(err.Error()).To(ContainSubstring("200 layers, more than the cap of 50"))
	g.Expect(reg.requests.Load()-before).To(BeNumerically("<=", 2), "no payload was fetched")

	// Sign refuses to grow it further rather than write what Verify rejects.
	other, _ := testKey(t, 1)
	err = c.Sign(ctx, "rendered/x", desc.Digest, other)
	g.Expect(Reason(err)).To(Equal(ReasonTooLarge))
	g.Expect(err.Error()).To(ContainSubstring("the cap is 50"))
}

func TestOversizedSignaturePayload(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	_, pub := testKey(t, 0)
	desc := pushFiles(t, c, "rendered/x", "v1", "content")
	big := newBlob(ctypes.SimpleSigningMediaType, bytes.Repeat([]byte(" "), MaxSignaturePayloadBytes+1))
	big.desc.Annotations = map[string]string{AnnotationSignature: "AAAA"}
	r, _ := c.repository("rendered/x")
	g.Expect(c.pushSignatures(ctx, r, "rendered/x", desc.Digest, []ocispec.Descriptor{big.desc}, big)).To(Succeed())

	reg.mu.Lock()
	reg.paths = nil
	reg.mu.Unlock()
	_, err := c.Verify(ctx, "rendered/x", desc.Digest, []*PublicKey{pub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))
	g.Expect(err.Error()).To(ContainSubstring("payload exceeds the cap of 65536 bytes"))
	reg.mu.Lock()
	defer reg.mu.Unlock()
	g.Expect(reg.paths).NotTo(BeEmpty())
	for _, p := range reg.paths {
		g.Expect(p).NotTo(HaveSuffix(big.desc.Digest.String()), "the payload was not downloaded")
	}
}

// TestTagMovedAfterResolve: what was resolved is what is pulled and verified,
// whatever the tag points to later.
func TestTagMovedAfterResolve(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	keyA, pubA := testKey(t, 0)
	keyB, _ := testKey(t, 1)
	a := pushFiles(t, c, "rendered/x", "v1", "content A")
	g.Expect(c.Sign(ctx, "rendered/x", a.Digest, keyA)).To(Succeed())

	resolved, err := c.Resolve(ctx, "rendered/x", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resolved.Digest).To(Equal(a.Digest))

	b := pushFiles(t, c, "rendered/x", "v1", "content B")
	g.Expect(c.Sign(ctx, "rendered/x", b.Digest, keyB)).To(Succeed())
	moved, err := c.Resolve(ctx, "rendered/x", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.Digest).To(Equal(b.Digest))

	files, _, err := c.PullArtifact(ctx, "rendered/x", resolved.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(files[0].Data)).To(Equal("content A"))
	res, err := c.Verify(ctx, "rendered/x", resolved.Digest, []*PublicKey{pubA})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.KeyID).To(Equal(pubA.ID()))
	_, err = c.Verify(ctx, "rendered/x", b.Digest, []*PublicKey{pubA})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))
}

// TestCosignVerifiesOurSignatures: cosign's own remote verification (what
// `cosign verify --key --insecure-ignore-tlog` runs) accepts what Sign writes.
func TestCosignVerifiesOurSignatures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	key, _ := testKey(t, 0)
	_, otherPubPEM, err := GenerateKeyPair(nil)
	g.Expect(err).NotTo(HaveOccurred())
	desc, _, err := c.PushChart(ctx, "charts/podinfo", chartArchive(t, "podinfo", "1.0.0"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Sign(ctx, "charts/podinfo", desc.Digest, key)).To(Succeed())

	ref, err := name.ParseReference(reg.host() + "/charts/podinfo@" + desc.Digest.String())
	g.Expect(err).NotTo(HaveOccurred())
	n, err := cosignVerify(t, ref, publicPEM(t, key))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	_, err = cosignVerify(t, ref, otherPubPEM)
	g.Expect(err).To(HaveOccurred(), "cosign rejects another key")
}

// cosignVerify runs cosign's remote verification of ref with the PEM public key
// the way `cosign verify --key k.pub --insecure-ignore-tlog` does, and returns
// the number of signatures that verified.
func cosignVerify(t *testing.T, ref name.Reference, pubPEM []byte) (int, error) {
	t.Helper()
	// What cosign's LoadPublicKeyRaw does for --key.
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	checked, _, err := cosign.VerifyImageSignatures(context.Background(), ref, &cosign.CheckOpts{
		SigVerifier: v, IgnoreTlog: true, IgnoreSCT: true, ClaimVerifier: cosign.SimpleClaimVerifier,
	})
	return len(checked), err
}

// TestWeVerifyCosignSignatures: signatures written by cosign's own packages (as
// `cosign sign --key --tlog-upload=false` does) verify with Verify, and both
// append to each other's signature manifests.
func TestWeVerifyCosignSignatures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	ourKey, ourPub := testKey(t, 0)
	cosignPriv, cosignPubPEM, err := GenerateKeyPair([]byte("pw"))
	g.Expect(err).NotTo(HaveOccurred())
	cosignPub, err := LoadPublicKey(cosignPubPEM)
	g.Expect(err).NotTo(HaveOccurred())
	desc := pushFiles(t, c, "rendered/x", "v1", "content")
	ref, err := name.NewDigest(reg.host() + "/rendered/x@" + desc.Digest.String())
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(c.Sign(ctx, "rendered/x", desc.Digest, ourKey)).To(Succeed())
	cosignSign(t, ref, cosignPriv, []byte("pw"))

	for _, pub := range []*PublicKey{ourPub, cosignPub} {
		res, err := c.Verify(ctx, "rendered/x", desc.Digest, []*PublicKey{pub})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.KeyID).To(Equal(pub.ID()))
		g.Expect(res.Signatures).To(Equal(2))
	}

	// Cosign first: a digest only cosign signed verifies with its key only...
	other := pushFiles(t, c, "rendered/x", "v2", "other content")
	otherRef, _ := name.NewDigest(reg.host() + "/rendered/x@" + other.Digest.String())
	cosignSign(t, otherRef, cosignPriv, []byte("pw"))
	res, err := c.Verify(ctx, "rendered/x", other.Digest, []*PublicKey{ourPub, cosignPub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.KeyID).To(Equal(cosignPub.ID()))
	_, err = c.Verify(ctx, "rendered/x", other.Digest, []*PublicKey{ourPub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid))

	// ...then Sign appends to cosign's manifest, and cosign reads both.
	g.Expect(c.Sign(ctx, "rendered/x", other.Digest, ourKey)).To(Succeed())
	for _, pubPEM := range [][]byte{publicPEM(t, ourKey), cosignPubPEM} {
		n, err := cosignVerify(t, otherRef, pubPEM)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(1))
	}
}

// cosignSign signs ref with cosign's packages the way `cosign sign --key`
// does and appends the signature to the remote signature manifest.
func cosignSign(t *testing.T, ref name.Digest, privPEM, password []byte) {
	t.Helper()
	sv, err := cosign.LoadPrivateKey(privPEM, password, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := (&payload.Cosign{Image: ref}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sv.SignMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	ociSig, err := static.NewSignature(raw, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		t.Fatal(err)
	}
	se, err := ociremote.SignedEntity(ref)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, ociSig)
	if err != nil {
		t.Fatal(err)
	}
	if err := ociremote.WriteSignatures(ref.Repository, signed); err != nil {
		t.Fatal(err)
	}
}

func publicPEM(t *testing.T, k *PrivateKey) []byte {
	t.Helper()
	pub, err := k.signer.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pemBytes), "PUBLIC KEY") {
		t.Fatalf("not a public key PEM: %s", pemBytes)
	}
	return pemBytes
}

// TestSignatureManifestOverTheCap: a signature manifest larger than
// MaxManifestBytes is SignatureInvalid naming the cap, read no further than it.
func TestSignatureManifestOverTheCap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	_, pub := testKey(t, 0)
	desc := pushFiles(t, reg.client(t, nil), "rendered/x", "v1", "content")
	big := bytes.Repeat([]byte(" "), 64<<20)
	bigDigest := digest.FromBytes(big)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/manifests/"+SignatureTag(desc.Digest)):
			w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
			w.Header().Set("Docker-Content-Digest", bigDigest.String())
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		case strings.HasSuffix(r.URL.Path, "/manifests/"+bigDigest.String()):
			w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
			w.Header().Set("Docker-Content-Digest", bigDigest.String())
			_, _ = w.Write(big)
		default:
			reg.srv.Config.Handler.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.Verify(ctx, "rendered/x", desc.Digest, []*PublicKey{pub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureInvalid), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("cap"))
}

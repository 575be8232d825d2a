package supply

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

func TestParseOCI(t *testing.T) {
	const dgst = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	for _, tc := range []struct {
		url, version, digest string
		want                 OCIRef
		err                  string
	}{
		{url: "oci://r.example/charts/web/", version: "1.2.3+build.1", want: OCIRef{Host: "r.example", Repo: "charts/web", Tag: "1.2.3_build.1"}},
		{url: "oci://r.example/web", digest: dgst, want: OCIRef{Host: "r.example", Repo: "web", Digest: dgst}},
		{url: "https://r.example/web", version: "1", err: `chart url "https://r.example/web" is not oci://host/repository`},
		{url: "oci://r.example", version: "1", err: "is not oci://host/repository (put the version"},
		{url: "oci://r.example/web:1", version: "1", err: "is not oci://host/repository (put the version"},
		{url: "oci://r.example/web", digest: "sha256:nope", err: `chart digest "sha256:nope"`},
		{url: "oci://r.example/web", err: "chart oci://r.example/web needs a version or a digest"},
	} {
		g := NewWithT(t)
		got, err := ParseChart(&cairnv1.ChartSource{URL: tc.url, Version: tc.version, Digest: tc.digest})
		if tc.err != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)), tc.url)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), tc.url)
		g.Expect(got).To(Equal(tc.want), tc.url)
	}
	_, err := ParseTimoni(&cairnv1.TimoniModule{URL: "oci://r.example"})
	NewWithT(t).Expect(err).To(MatchError(HavePrefix("Timoni module url")))
}

// TestVerifyOCI: an artifact is resolved once per sync and checked by its Registry's
// policy: Enforce fails what does not verify, Warn reports it, Off skips the check.
func TestVerifyOCI(t *testing.T) {
	ctx := context.Background()
	host, c := testRegistry(t)
	_, pubPEM, key := testKey(t)
	push := func(repo, content string) string {
		desc, _, err := c.PushArtifact(ctx, repo, "v1", "application/vnd.cairn.test.v1",
			[]sign.File{{Name: "f", Data: []byte(content)}}, nil)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return desc.Digest.String()
	}
	signedDigest := push("signed", "a")
	NewWithT(t).Expect(c.Sign(ctx, "signed", digest.Digest(signedDigest), key)).To(Succeed())
	unsignedDigest := push("unsigned", "b")
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{"keys": secret("keys", map[string]string{"cosign.pub": string(pubPEM)})}}
	pub, err := sign.LoadPublicKey(pubPEM)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name     string
		mode     cairnv1.VerifyMode
		secrets  SecretSource
		keys     bool
		repo     string
		tag      string // "v1" unless set
		digest   string
		want     string
		keyID    string
		reason   string // of the failure, "" when the artifact may be pulled
		message  string
		wantPull string // the digest to pull
	}{
		{name: "signed, keys enforce", secrets: cluster, keys: true, repo: "signed",
			want: cairnv1.VerificationVerified, keyID: pub.ID(), wantPull: signedDigest},
		{name: "unsigned, keys enforce", secrets: cluster, keys: true, repo: "unsigned",
			want: cairnv1.VerificationFailed, reason: cairnv1.ReasonSignatureMissing},
		{name: "unsigned, Warn", mode: cairnv1.VerifyWarn, secrets: cluster, keys: true, repo: "unsigned",
			want: cairnv1.VerificationUnverified, wantPull: unsignedDigest},
		{name: "unsigned, Off", mode: cairnv1.VerifyOff, secrets: cluster, keys: true, repo: "unsigned",
			want: cairnv1.VerificationSkipped, message: "verify.mode is Off", wantPull: unsignedDigest},
		{name: "no keys, no mode", secrets: cluster, repo: "unsigned",
			want: cairnv1.VerificationUnverified, message: "Registry r declares no cosign keys", wantPull: unsignedDigest},
		{name: "no keys, Enforce", mode: cairnv1.VerifyEnforce, secrets: cluster, repo: "signed",
			want: cairnv1.VerificationFailed, reason: cairnv1.ReasonSignatureMissing},
		{name: "keys in the cluster, none here", keys: true, repo: "signed",
			want: cairnv1.VerificationUnverified, message: "not checked: the keys of Registry r are in the cluster", wantPull: signedDigest},
		{name: "by digest", secrets: cluster, keys: true, repo: "signed", tag: "-", digest: signedDigest,
			want: cairnv1.VerificationVerified, keyID: pub.ID(), wantPull: signedDigest},
		{name: "version and digest agree", secrets: cluster, keys: true, repo: "signed", digest: signedDigest,
			want: cairnv1.VerificationVerified, keyID: pub.ID(), wantPull: signedDigest},
		{name: "version resolves elsewhere", secrets: cluster, keys: true, repo: "signed", digest: unsignedDigest,
			want: cairnv1.VerificationFailed, reason: cairnv1.ReasonArtifactFailed, message: "resolves to " + signedDigest + ", not the declared digest"},
		{name: "tag not found", secrets: cluster, keys: true, repo: "signed", tag: "v9",
			want: cairnv1.VerificationFailed, reason: sign.ReasonNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var opts []func(*cairnv1.RegistrySpec)
			if tc.keys {
				opts = append(opts, withKeys("keys", ""))
			}
			sc := New(ctx, Config{Mode: tc.mode, Secrets: tc.secrets, Verifier: &sign.Verifier{}}, []*cairnv1.Registry{registryOf("r", host, opts...)})
			ref := OCIRef{Host: host, Repo: tc.repo, Tag: tc.tag, Digest: tc.digest}
			switch tc.tag {
			case "":
				ref.Tag = "v1"
			case "-":
				ref.Tag = ""
			}
			statuses, artifact, f := sc.VerifyOCI(ctx, ref)
			g.Expect(statuses).To(HaveLen(1))
			st := statuses[0]
			g.Expect(st.Verification).To(Equal(tc.want))
			g.Expect(st.KeyID).To(Equal(tc.keyID))
			g.Expect(st.Message).To(ContainSubstring(tc.message))
			if tc.reason != "" {
				g.Expect(f).NotTo(BeNil())
				g.Expect(f.Reason).To(Equal(tc.reason))
				g.Expect(st.Reason).To(Equal(tc.reason))
				g.Expect(artifact).To(BeNil())
				return
			}
			g.Expect(f).To(BeNil())
			g.Expect(st.Digest).To(Equal(tc.wantPull))
			g.Expect(artifact.Digest).To(Equal(tc.wantPull))
			g.Expect(artifact.Display()).To(Equal("oci://" + host + "/" + tc.repo + "@" + tc.wantPull))
		})
	}
}

// TestResolvedOncePerSync: every use of a tag in one sync gets the digest of its
// first resolution, even when the tag moves in between; the next sync sees the move.
func TestResolvedOncePerSync(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	host, c := testRegistry(t)
	push := func(content string) string {
		desc, _, err := c.PushArtifact(ctx, "m", "v1", "application/vnd.cairn.test.v1", []sign.File{{Name: "f", Data: []byte(content)}}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return desc.Digest.String()
	}
	first := push("one")
	regs := []*cairnv1.Registry{registryOf("r", host)}
	sc := New(ctx, Config{Verifier: &sign.Verifier{}}, regs)
	got, err := sc.ResolveVerified(ctx, host, "m", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(first))
	moved := push("two")
	got, err = sc.ResolveVerified(ctx, host, "m", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(first))

	got, err = New(ctx, Config{Verifier: &sign.Verifier{}}, regs).ResolveVerified(ctx, host, "m", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(moved))

	_, err = sc.ResolveVerified(ctx, "elsewhere.example", "m", "v1")
	g.Expect(err).To(MatchError("no Registry declares host elsewhere.example"))
	_, _, f := sc.VerifyOCI(ctx, OCIRef{Host: "elsewhere.example", Repo: "m", Tag: "v1"})
	g.Expect(f).NotTo(BeNil())
	g.Expect(f.Kind).To(Equal(outcome.Stalled))
	g.Expect(f.Reason).To(Equal(cairnv1.ReasonRegistryNotReady))
}

// TestVerifyModules: a registry module and the catalogs are checked in order, up to
// the first that fails; an undeclared module registry checks nothing (the renderer
// reports it).
func TestVerifyModules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	host, c := testRegistry(t)
	desc, _, err := c.PushArtifact(ctx, "cairn.dev/web", "v0.1.0", "application/vnd.cairn.test.v1", []sign.File{{Name: "f", Data: []byte("web")}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	sc := New(ctx, Config{Verifier: &sign.Verifier{}}, []*cairnv1.Registry{registryOf("modules", host)})
	statuses, f := sc.VerifyModules(ctx, "modules", []render.Catalog{
		{Module: "cairn.dev/web@v0", Version: "v0.1.0"}, {Module: "cairn.dev/catalog@v0", Version: "v0.2.0"}, {Module: "cairn.dev/never@v0", Version: "v1"}})
	g.Expect(f).NotTo(BeNil())
	g.Expect(f.Reason).To(Equal(sign.ReasonNotFound))
	g.Expect(statuses).To(HaveLen(2))
	g.Expect(statuses[0].Ref).To(Equal(host + "/cairn.dev/web:v0.1.0"))
	g.Expect(statuses[0].Digest).To(Equal(desc.Digest.String()))
	g.Expect(statuses[0].Verification).To(Equal(cairnv1.VerificationUnverified))
	g.Expect(statuses[1].Ref).To(Equal(host + "/cairn.dev/catalog:v0.2.0"))
	g.Expect(statuses[1].Verification).To(Equal(cairnv1.VerificationFailed))

	statuses, f = sc.VerifyModules(ctx, "undeclared", []render.Catalog{{Module: "cairn.dev/web@v0", Version: "v0.1.0"}})
	g.Expect(statuses).To(BeNil())
	g.Expect(f).To(BeNil())
}

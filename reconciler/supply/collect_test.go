package supply

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/sign"
)

func hexOf(c byte) string { return strings.Repeat(string(c), 64) }

// TestKeptRenders: the renders whose artifacts stay are the newest keep of the
// history, the one just applied and the held ones, each once.
func TestKeptRenders(t *testing.T) {
	history := func(digests ...string) []cairnv1.HistoryEntry {
		var h []cairnv1.HistoryEntry
		for _, d := range digests {
			h = append(h, cairnv1.HistoryEntry{RenderDigest: d})
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		history []cairnv1.HistoryEntry
		keep    int
		applied string
		held    []string
		want    []string
	}{
		{"the newest keep", history("d", "c", "b", "a"), 2, "d", nil, []string{"d", "c"}},
		{"keep beyond the history", history("b", "a"), 10, "b", nil, []string{"b", "a"}},
		{"the render just applied even when the history does not have it first", history("c", "b"), 1, "x", nil, []string{"x", "c"}},
		{"a rollback: the same render twice in the history counts once", history("a", "b", "a"), 3, "a", nil, []string{"a", "b"}},
		{"held renders stay", history("c", "b", "a"), 1, "c", []string{"a"}, []string{"c", "a"}},
		{"an entry without a render digest keeps nothing", history("", "a"), 2, "", nil, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(KeptRenders(tc.history, tc.keep, tc.applied, tc.held)).To(Equal(tc.want))
		})
	}
}

// TestGarbage: the render tags not kept and the signatures of manifests not kept
// are garbage; tags of any other shape are not cairn's and stay.
func TestGarbage(t *testing.T) {
	render := func(c byte) string { return "hmac-sha256-" + hexOf(c) }
	sig := func(c byte) string { return "sha256-" + hexOf(c) + ".sig" }
	manifest := func(c byte) string { return "sha256:" + hexOf(c) }
	for _, tc := range []struct {
		name                string
		tags                []string
		keep, kept          []string
		renders, signatures []string
	}{
		{name: "an empty repository"},
		{name: "the old render and its signature go",
			tags: []string{render('a'), sig('1'), render('b'), sig('2')}, keep: []string{render('b')}, kept: []string{manifest('2')},
			renders: []string{render('a')}, signatures: []string{sig('1')}},
		{name: "every kept render and signature stays",
			tags: []string{render('a'), sig('1'), render('b'), sig('2')}, keep: []string{render('a'), render('b')}, kept: []string{manifest('1'), manifest('2')}},
		{name: "a signature whose manifest is gone goes",
			tags: []string{render('b'), sig('2'), sig('9')}, keep: []string{render('b')}, kept: []string{manifest('2')},
			signatures: []string{sig('9')}},
		{name: "unkept sha256 render tags (unkeyed digests) go too",
			tags: []string{"sha256-" + hexOf('c'), render('b')}, keep: []string{render('b')},
			renders: []string{"sha256-" + hexOf('c')}},
		{name: "tags of other shapes stay",
			tags: []string{"latest", "v1.2.3", "sha256-" + hexOf('3') + ".att", "sha256-short.sig", render('b')}, keep: []string{render('b')}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			renders, signatures := Garbage(tc.tags, set(tc.keep), set(tc.kept))
			g.Expect(renders).To(Equal(tc.renders))
			g.Expect(signatures).To(Equal(tc.signatures))
		})
	}
}

func set(items []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range items {
		out[s] = true
	}
	return out
}

// TestCollectRenders: against a registry, four signed renders of team-a/web and
// one of team-a/api; keeping two of web deletes the other two and their
// signatures (they no longer pull by digest), and leaves the kept ones signed and
// api untouched; a second collection deletes nothing more.
func TestCollectRenders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	host, c := testRegistry(t)
	privPEM, pubPEM, _ := testKey(t)
	pub, err := sign.LoadPublicKey(pubPEM)
	g.Expect(err).NotTo(HaveOccurred())
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{
		"signing": secret("signing", map[string]string{"cosign.key": string(privPEM), "cosign.password": "pw"}),
	}}
	sc := New(ctx, Config{Secrets: cluster, Verifier: &sign.Verifier{}}, []*cairnv1.Registry{registryOf("out", host, withSigning("signing"))})
	published := map[string]Published{}
	for i, name := range []string{"web", "web", "web", "web", "api"} {
		p := publication()
		p.Name, p.RenderDigest, p.Revision = name, "hmac-sha256:"+hexOf("01234"[i]), fmt.Sprint("rev-", i)
		got, f := sc.Publish(ctx, p)
		g.Expect(f).To(BeNil())
		published[p.RenderDigest] = got
	}
	keep := []string{"hmac-sha256:" + hexOf('3'), "hmac-sha256:" + hexOf('2')}
	col := Collection{Registry: "out", Repository: "/renders/", Namespace: "team-a", Name: "web", Keep: keep}

	got, err := sc.CollectRenders(ctx, col)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Renders).To(ConsistOf(RenderTag("hmac-sha256:"+hexOf('0')), RenderTag("hmac-sha256:"+hexOf('1'))))
	g.Expect(got.Signatures).To(HaveLen(2))
	for i, c2 := range "0123" {
		p := published["hmac-sha256:"+hexOf(byte(c2))]
		_, err := c.FetchManifest(ctx, "renders/team-a/web", digest.Digest(p.Digest))
		_, verr := c.Verify(ctx, "renders/team-a/web", digest.Digest(p.Digest), []*sign.PublicKey{pub})
		if i < 2 {
			g.Expect(sign.Reason(err)).To(Equal(sign.ReasonNotFound), "render %d deleted", i)
			g.Expect(verr).To(HaveOccurred())
			sig, err := c.Resolve(ctx, "renders/team-a/web", sign.SignatureTag(digest.Digest(p.Digest)))
			if err == nil { // this registry keeps a tag whose manifest was deleted: the manifest must be gone
				_, err = c.FetchManifest(ctx, "renders/team-a/web", sig.Digest)
			}
			g.Expect(sign.Reason(err)).To(Equal(sign.ReasonNotFound), "its signature deleted")
		} else {
			g.Expect(err).NotTo(HaveOccurred(), "render %d kept", i)
			g.Expect(verr).NotTo(HaveOccurred(), "and still signed")
		}
	}
	api := published["hmac-sha256:"+hexOf('4')]
	_, err = c.Verify(ctx, "renders/team-a/api", digest.Digest(api.Digest), []*sign.PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred(), "another instance's artifacts are untouched")

	_, err = sc.CollectRenders(ctx, col)
	g.Expect(err).NotTo(HaveOccurred(), "collecting again finds nothing it fails on")
	_, f := sc.CollectRenders(ctx, Collection{Registry: "nope"})
	g.Expect(f).To(HaveOccurred())
}

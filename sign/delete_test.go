package sign

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

// TestTagsAndDelete: Tags lists every tag (an unknown repository has none);
// Delete removes a manifest by digest, so it no longer pulls, leaves the other
// manifests of the repository, and takes a manifest already gone for done.
func TestTagsAndDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	key, _ := testKey(t, 0)

	tags, err := c.Tags(ctx, "renders/team-a/web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(BeEmpty())

	old := pushFiles(t, c, "renders/team-a/web", "sha256-1111", "old")
	kept := pushFiles(t, c, "renders/team-a/web", "sha256-2222", "kept")
	g.Expect(c.Sign(ctx, "renders/team-a/web", old.Digest, key)).To(Succeed())
	tags, err = c.Tags(ctx, "renders/team-a/web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tags).To(ConsistOf("sha256-1111", "sha256-2222", SignatureTag(old.Digest)))

	g.Expect(c.Delete(ctx, "renders/team-a/web", old.Digest)).To(Succeed())
	_, err = c.FetchManifest(ctx, "renders/team-a/web", old.Digest)
	g.Expect(Reason(err)).To(Equal(ReasonNotFound), "deleted: %v", err)
	_, _, err = c.PullArtifact(ctx, "renders/team-a/web", kept.Digest)
	g.Expect(err).NotTo(HaveOccurred(), "the other manifest stays")
	g.Expect(c.Delete(ctx, "renders/team-a/web", old.Digest)).To(Succeed(), "already gone")
	g.Expect(Reason(c.Delete(ctx, "renders/team-a/web", "sha256:nothex"))).To(Equal(ReasonInvalidArtifact))
}

// TestDeleteRefused: a registry that does not allow deletes (405, as distribution
// answers with deletes disabled) fails with ReasonUnsupported, not found or
// transient; its error names the manifest and no credential.
func TestDeleteRefused(t *testing.T) {
	g := NewWithT(t)
	refuse := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusMethodNotAllowed)
				_, _ = w.Write([]byte(`{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	reg := newTestRegistry(t, func(h http.Handler) http.Handler { return basicAuth("user", "s3cret-pass")(refuse(h)) })
	c := reg.client(t, &Credentials{Username: "user", Password: "s3cret-pass"})
	desc := pushFiles(t, c, "renders/team-a/web", "sha256-1111", "old")
	err := c.Delete(context.Background(), "renders/team-a/web", desc.Digest)
	g.Expect(Reason(err)).To(Equal(ReasonUnsupported), "%v", err)
	g.Expect(Transient(err)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring(desc.Digest.String()))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret-pass"))
}

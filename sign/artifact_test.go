package sign

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

const testArtifactType = "application/vnd.cairn.rendered.v1"

func TestPushPullArtifact(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	files := []File{
		{Name: "team-a/podinfo.yaml", MediaType: "application/yaml", Data: []byte("kind: ConfigMap\n")},
		{Name: "team-b/redis.yaml", MediaType: "application/yaml", Data: []byte("kind: Secret\n")},
		{Name: "same-content.yaml", Data: []byte("kind: Secret\n")},
	}
	ann := map[string]string{"dev.cairn.source-sha": "0123abcd"}

	desc, existed, err := c.PushArtifact(ctx, "rendered/cluster", "render-1", testArtifactType, files, ann)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeFalse())

	before := reg.requests.Load()
	again, existed, err := c.PushArtifact(ctx, "rendered/cluster", "render-1", testArtifactType, files, ann)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeTrue())
	g.Expect(again.Digest).To(Equal(desc.Digest))
	g.Expect(reg.requests.Load()-before).To(BeNumerically("==", 1), "only the tag is resolved")

	got, gotAnn, err := c.PullArtifact(ctx, "rendered/cluster", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveLen(3))
	g.Expect(got[0]).To(Equal(files[0]))
	g.Expect(got[2].MediaType).To(Equal("application/octet-stream"))
	g.Expect(got[2].Data).To(Equal(files[2].Data))
	g.Expect(gotAnn).To(HaveKeyWithValue("dev.cairn.source-sha", "0123abcd"))
	g.Expect(gotAnn).To(HaveKeyWithValue(ocispec.AnnotationCreated, fixedCreated))

	// Other content under the same tag moves it.
	other, existed, err := c.PushArtifact(ctx, "rendered/cluster", "render-1", testArtifactType, files[:1], ann)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(existed).To(BeFalse())
	g.Expect(other.Digest).NotTo(Equal(desc.Digest))
	moved, err := c.Resolve(ctx, "rendered/cluster", "render-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.Digest).To(Equal(other.Digest))
}

func TestArtifactWithoutFiles(t *testing.T) {
	g := NewWithT(t)
	c := newTestRegistry(t, nil).client(t, nil)
	desc, _, err := c.PushArtifact(context.Background(), "rendered/empty", "e", testArtifactType, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	files, _, err := c.PullArtifact(context.Background(), "rendered/empty", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(BeEmpty())
}

func TestPushArtifactRejects(t *testing.T) {
	c := newTestRegistry(t, nil).client(t, nil)
	tests := []struct {
		name         string
		artifactType string
		files        []File
		reason       string
	}{
		{"no artifact type", "", []File{{Name: "a"}}, ReasonInvalidArtifact},
		{"absolute name", testArtifactType, []File{{Name: "/etc/passwd"}}, ReasonInvalidArtifact},
		{"parent name", testArtifactType, []File{{Name: "../x"}}, ReasonInvalidArtifact},
		{"unclean name", testArtifactType, []File{{Name: "a//b"}}, ReasonInvalidArtifact},
		{"duplicate name", testArtifactType, []File{{Name: "a"}, {Name: "a"}}, ReasonInvalidArtifact},
		{"too many files", testArtifactType, make([]File, MaxArtifactFiles+1), ReasonTooLarge},
		{"too large", testArtifactType, []File{{Name: "a", Data: make([]byte, MaxArtifactBytes+1)}}, ReasonTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := c.PushArtifact(context.Background(), "rendered/x", "t", tt.artifactType, tt.files, nil)
			g.Expect(Reason(err)).To(Equal(tt.reason))
			g.Expect(err.Error()).To(ContainSubstring(c.Host() + "/rendered/x:t"))
		})
	}
}

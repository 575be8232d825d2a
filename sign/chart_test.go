package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

func TestPushPullChart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	tgz := chartArchive(t, "podinfo", "6.7.0+build.1")

	desc, tag, err := c.PushChart(ctx, "charts/podinfo", tgz)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tag).To(Equal("6.7.0_build.1"))
	g.Expect(desc.MediaType).To(Equal(ocispec.MediaTypeImageManifest))

	resolved, err := c.Resolve(ctx, "charts/podinfo", tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resolved.Digest).To(Equal(desc.Digest))

	pulled, err := c.PullChart(ctx, "charts/podinfo", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled).To(Equal(tgz))

	// The same archive gives the same digest.
	again, _, err := c.PushChart(ctx, "charts/podinfo", tgz)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(desc.Digest))

	// The manifest is helm's: config of helm's media type with the chart metadata.
	raw, err := c.FetchManifest(ctx, "charts/podinfo", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	var m ocispec.Manifest
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	g.Expect(m.Config.MediaType).To(Equal(helmregistry.ConfigMediaType))
	g.Expect(m.Layers).To(HaveLen(1))
	g.Expect(m.Layers[0].MediaType).To(Equal(helmregistry.ChartLayerMediaType))
	g.Expect(m.Annotations).To(HaveKeyWithValue(ocispec.AnnotationTitle, "podinfo"))
	g.Expect(m.Annotations).To(HaveKeyWithValue(ocispec.AnnotationVersion, "6.7.0+build.1"))
	g.Expect(m.Annotations).NotTo(HaveKey(ocispec.AnnotationCreated))
}

// TestPushedChartPullsWithHelm pulls what PushChart wrote with helm's own
// registry client, the code behind `helm pull oci://...`.
func TestPushedChartPullsWithHelm(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	tgz := chartArchive(t, "podinfo", "6.7.0")
	_, tag, err := c.PushChart(context.Background(), "charts/podinfo", tgz)
	g.Expect(err).NotTo(HaveOccurred())

	helm, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard),
		helmregistry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := helm.Pull(reg.host() + "/charts/podinfo:" + tag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Chart.Data).To(Equal(tgz))
	g.Expect(res.Chart.Meta.Name).To(Equal("podinfo"))
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ch.Metadata.Version).To(Equal("6.7.0"))
}

func TestPushChartRejectsWhatIsNotAChart(t *testing.T) {
	g := NewWithT(t)
	c := newTestRegistry(t, nil).client(t, nil)
	_, _, err := c.PushChart(context.Background(), "charts/x", []byte("not a tgz"))
	g.Expect(Reason(err)).To(Equal(ReasonInvalidArtifact))
	g.Expect(err.Error()).To(ContainSubstring("charts/x"))

	_, _, err = c.PushChart(context.Background(), "charts/x", make([]byte, MaxChartBytes+1))
	g.Expect(Reason(err)).To(Equal(ReasonTooLarge))
}

func TestPullChartRejectsOtherArtifacts(t *testing.T) {
	g := NewWithT(t)
	c := newTestRegistry(t, nil).client(t, nil)
	desc := pushFiles(t, c, "charts/x", "v1", "a: b\n")
	_, err := c.PullChart(context.Background(), "charts/x", desc.Digest)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidArtifact))
	g.Expect(err.Error()).To(ContainSubstring(desc.Digest.String()))
}

package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// PackageChart packages ch the way `helm package` does (chartutil.Save) and
// returns the .tgz.
func PackageChart(ch *chart.Chart) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "cairn-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, fmt.Errorf("failed to package chart %s: %w", ch.Name(), err)
	}
	return os.ReadFile(file)
}

// PushChart pushes a packaged Helm chart (a .tgz of at most MaxChartBytes) to repo
// the way `helm push` does: a Helm config blob (the chart's metadata as JSON), one
// chart layer and an OCI image manifest, tagged with the chart version ("+"
// replaced by "_"). Unlike `helm push`, repo is the chart's whole repository (the
// chart name is not appended), and no creation time is recorded, so the same
// archive always gives the same digest. It returns the manifest and the tag.
func (c *Client) PushChart(ctx context.Context, repo string, tgz []byte) (ocispec.Descriptor, string, error) {
	ref := c.host + "/" + repo
	meta, err := chartMetadata(tgz)
	if err != nil {
		return ocispec.Descriptor{}, "", withRef(err, "push chart", ref)
	}
	config, err := json.Marshal(meta)
	if err != nil {
		return ocispec.Descriptor{}, "", fmt.Errorf("failed to encode the metadata of chart %s: %w", meta.Name, err)
	}
	blobs := []blob{newBlob(helmregistry.ConfigMediaType, config), newBlob(helmregistry.ChartLayerMediaType, tgz)}
	manifest, err := marshalManifest(ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      blobs[0].desc,
		Layers:      []ocispec.Descriptor{blobs[1].desc},
		Annotations: chartAnnotations(meta),
	})
	if err != nil {
		return ocispec.Descriptor{}, "", err
	}
	r, err := c.repository(repo)
	if err != nil {
		return ocispec.Descriptor{}, "", err
	}
	tag := strings.ReplaceAll(meta.Version, "+", "_")
	if err := c.pushManifest(ctx, r, repo, blobs, manifest, tag); err != nil {
		return ocispec.Descriptor{}, "", err
	}
	return manifest.desc, tag, nil
}

// chartMetadata loads the chart of a .tgz and returns its Chart.yaml.
func chartMetadata(tgz []byte) (*chart.Metadata, error) {
	if len(tgz) > MaxChartBytes {
		return nil, newError(ReasonTooLarge, "", "", fmt.Errorf("chart archive of %d bytes exceeds the cap of %d", len(tgz), MaxChartBytes))
	}
	ch, err := loader.LoadArchive(bytes.NewReader(tgz))
	if err != nil {
		return nil, newError(ReasonInvalidArtifact, "", "", fmt.Errorf("not a Helm chart archive: %w", err))
	}
	if ch.Metadata == nil || ch.Metadata.Version == "" {
		return nil, newError(ReasonInvalidArtifact, "", "", fmt.Errorf("chart archive has no version in Chart.yaml"))
	}
	return ch.Metadata, nil
}

// withRef fills in the operation and object of an *Error made without them.
func withRef(err error, op, ref string) error {
	if e, ok := err.(*Error); ok && e.Op == "" {
		e.Op, e.Ref = op, ref
	}
	return err
}

// chartAnnotations are the manifest annotations helm writes, without the creation
// time: title, version, description, url, source and authors, then the chart's own
// annotations, which cannot override those.
func chartAnnotations(meta *chart.Metadata) map[string]string {
	ann := map[string]string{}
	for k, v := range meta.Annotations {
		ann[k] = v
	}
	set := func(k, v string) {
		if strings.TrimSpace(v) != "" {
			ann[k] = v
		} else {
			delete(ann, k)
		}
	}
	set(ocispec.AnnotationTitle, meta.Name)
	set(ocispec.AnnotationVersion, meta.Version)
	set(ocispec.AnnotationDescription, meta.Description)
	set(ocispec.AnnotationURL, meta.Home)
	delete(ann, ocispec.AnnotationCreated)
	if len(meta.Sources) > 0 {
		set(ocispec.AnnotationSource, meta.Sources[0])
	}
	if authors := chartAuthors(meta); authors != "" {
		ann[ocispec.AnnotationAuthors] = authors
	}
	return ann
}

func chartAuthors(meta *chart.Metadata) string {
	var parts []string
	for _, m := range meta.Maintainers {
		if m == nil {
			continue
		}
		s := m.Name
		if m.Email != "" {
			s += " (" + m.Email + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// PullChart returns the chart archive of the Helm chart manifest dgst of repo: the
// manifest must have exactly one chart layer, of at most MaxChartBytes, and both
// are checked against their digests.
func (c *Client) PullChart(ctx context.Context, repo string, dgst digest.Digest) ([]byte, error) {
	_, m, err := c.fetchManifest(ctx, repo, dgst)
	if err != nil {
		return nil, err
	}
	var layers []ocispec.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == helmregistry.ChartLayerMediaType || l.MediaType == helmregistry.LegacyChartLayerMediaType {
			layers = append(layers, l)
		}
	}
	if len(layers) != 1 {
		return nil, newError(ReasonInvalidArtifact, "pull chart", c.ref(repo, dgst.String()),
			fmt.Errorf("manifest has %d layers of media type %s, want exactly 1", len(layers), helmregistry.ChartLayerMediaType))
	}
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	return c.fetchBlob(ctx, r, repo, layers[0], MaxChartBytes)
}

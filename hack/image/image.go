package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// buildImage assembles the one-layer OCI image of opts.
func buildImage(opts options) (v1.Image, error) {
	created, err := sourceDate()
	if err != nil {
		return nil, err
	}
	binary, err := readStaticBinary(opts.binary, opts.arch)
	if err != nil {
		return nil, err
	}
	caBundle, err := os.ReadFile(opts.caBundle)
	if err != nil {
		return nil, fmt.Errorf("failed to read the CA bundle: %w", err)
	}
	layer, err := newLayer(layerEntries(binary, caBundle), created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, imageConfig(opts, created))
	if err != nil {
		return nil, fmt.Errorf("failed to set the image config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image", Comment: "cairn, CA bundle, nonroot user"},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to add the layer: %w", err)
	}
	return mutate.Annotations(img, labels(opts)).(v1.Image), nil
}

// newLayer packs entries into a gzip-compressed OCI layer, compressed once.
func newLayer(entries []entry, mtime time.Time) (v1.Layer, error) {
	raw, err := layerTar(entries, mtime)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("failed to compress the layer: %w", err)
	}
	return layer, nil
}

// imageConfig runs /cairn as nonroot from /, trusting the image's CA bundle.
func imageConfig(opts options, created time.Time) *v1.ConfigFile {
	return &v1.ConfigFile{
		Architecture: opts.arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{binaryPath},
			User:       fmt.Sprintf("%d:%d", nonrootID, nonrootID),
			WorkingDir: "/",
			Env:        []string{"SSL_CERT_FILE=" + caBundlePath},
			Labels:     labels(opts),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// labels are the OCI labels of the image, also set as manifest annotations.
func labels(opts options) map[string]string {
	l := map[string]string{ocispec.AnnotationTitle: "cairn"}
	for k, v := range map[string]string{
		ocispec.AnnotationSource:   opts.source,
		ocispec.AnnotationVersion:  opts.version,
		ocispec.AnnotationRevision: opts.revision,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// sourceDate is SOURCE_DATE_EPOCH (reproducible-builds.org), else the Unix epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds since 1970", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

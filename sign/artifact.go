package sign

import (
	"context"
	"fmt"
	"maps"
	"path"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
)

// File is one file of an artifact, stored as one layer titled Name.
type File struct {
	// Name is a clean relative slash-separated path, unique in the artifact.
	Name string
	// MediaType of the layer (application/octet-stream when empty).
	MediaType string
	// Data is the content.
	Data []byte
}

// fixedCreated is the creation time written into artifact manifests, so that the
// same files and annotations always give the same digest.
const fixedCreated = "1970-01-01T00:00:00Z"

// PushArtifact pushes files as an OCI 1.1 artifact of artifactType with the given
// manifest annotations, tagged tag. The manifest is deterministic (the creation
// annotation is fixed unless given), so tags can be content-addressed: when tag
// already points to the same manifest nothing is pushed and existed is true.
func (c *Client) PushArtifact(ctx context.Context, repo, tag, artifactType string, files []File, annotations map[string]string) (ocispec.Descriptor, bool, error) {
	ref := c.ref(repo, tag)
	manifest, blobs, err := packArtifact(ctx, artifactType, files, annotations)
	if err != nil {
		return ocispec.Descriptor{}, false, withRef(err, "push artifact", ref)
	}
	r, err := c.repository(repo)
	if err != nil {
		return ocispec.Descriptor{}, false, err
	}
	current, err := r.Resolve(ctx, tag)
	switch {
	case err == nil && current.Digest == manifest.desc.Digest:
		return manifest.desc, true, nil
	case err != nil && Reason(wrap("", "", err)) != ReasonNotFound:
		return ocispec.Descriptor{}, false, wrap("resolve", ref, err)
	}
	if err := c.pushManifest(ctx, r, repo, blobs, manifest, tag); err != nil {
		return ocispec.Descriptor{}, false, err
	}
	return manifest.desc, false, nil
}

// packArtifact packs the manifest with oras.PackManifest (OCI 1.1, empty config)
// and returns it with the blobs it references.
func packArtifact(ctx context.Context, artifactType string, files []File, annotations map[string]string) (blob, []blob, error) {
	if err := checkFiles(files); err != nil {
		return blob{}, nil, err
	}
	blobs := []blob{{desc: ocispec.DescriptorEmptyJSON, data: ocispec.DescriptorEmptyJSON.Data}}
	layers := make([]ocispec.Descriptor, 0, len(files))
	for _, f := range files {
		mediaType := f.MediaType
		if mediaType == "" {
			mediaType = "application/octet-stream"
		}
		b := newBlob(mediaType, f.Data)
		b.desc.Annotations = map[string]string{ocispec.AnnotationTitle: f.Name}
		blobs = append(blobs, b)
		layers = append(layers, b.desc)
	}
	ann := maps.Clone(annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	if ann[ocispec.AnnotationCreated] == "" {
		ann[ocispec.AnnotationCreated] = fixedCreated
	}
	store := memory.New()
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, artifactType,
		oras.PackManifestOptions{Layers: layers, ManifestAnnotations: ann})
	if err != nil {
		return blob{}, nil, newError(ReasonInvalidArtifact, "", "", err)
	}
	raw, err := content.FetchAll(ctx, store, desc)
	if err != nil {
		return blob{}, nil, fmt.Errorf("failed to read the packed manifest: %w", err)
	}
	return blob{desc: desc, data: raw}, blobs, nil
}

// checkFiles enforces the caps and that names are unique clean relative paths.
func checkFiles(files []File) error {
	if len(files) > MaxArtifactFiles {
		return newError(ReasonTooLarge, "", "", fmt.Errorf("%d files exceed the cap of %d", len(files), MaxArtifactFiles))
	}
	seen := map[string]bool{}
	var total int64
	for _, f := range files {
		if err := checkFileName(f.Name); err != nil {
			return newError(ReasonInvalidArtifact, "", "", err)
		}
		if seen[f.Name] {
			return newError(ReasonInvalidArtifact, "", "", fmt.Errorf("file %q appears twice", f.Name))
		}
		seen[f.Name] = true
		total += int64(len(f.Data))
	}
	if total > MaxArtifactBytes {
		return newError(ReasonTooLarge, "", "", fmt.Errorf("files of %d bytes exceed the cap of %d", total, MaxArtifactBytes))
	}
	return nil
}

func checkFileName(name string) error {
	if name == "" || path.Clean(name) != name || path.IsAbs(name) || name == ".." ||
		len(name) > 2 && name[:3] == "../" {
		return fmt.Errorf("file name %q is not a clean relative path", name)
	}
	return nil
}

// PullArtifact returns the files and the manifest annotations of the artifact
// dgst of repo. Every layer must be titled with a clean relative path; the number
// of files and their total size are capped (MaxArtifactFiles, MaxArtifactBytes)
// before anything is downloaded, and each file is checked against its digest.
func (c *Client) PullArtifact(ctx context.Context, repo string, dgst digest.Digest) ([]File, map[string]string, error) {
	ref := c.ref(repo, dgst.String())
	_, m, err := c.fetchManifest(ctx, repo, dgst)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLayers(fileLayers(m.Layers)); err != nil {
		return nil, nil, withRef(err, "pull artifact", ref)
	}
	r, err := c.repository(repo)
	if err != nil {
		return nil, nil, err
	}
	files := make([]File, 0, len(m.Layers))
	for _, l := range fileLayers(m.Layers) {
		data, err := c.fetchBlob(ctx, r, repo, l, MaxArtifactBytes)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, File{Name: l.Annotations[ocispec.AnnotationTitle], MediaType: l.MediaType, Data: data})
	}
	return files, m.Annotations, nil
}

// checkLayers applies the checks of checkFiles to the layers of a manifest.
func checkLayers(layers []ocispec.Descriptor) error {
	if len(layers) > MaxArtifactFiles {
		return newError(ReasonTooLarge, "", "", fmt.Errorf("%d layers exceed the cap of %d", len(layers), MaxArtifactFiles))
	}
	seen := map[string]bool{}
	var total int64
	for _, l := range layers {
		name := l.Annotations[ocispec.AnnotationTitle]
		if err := checkFileName(name); err != nil {
			return newError(ReasonInvalidArtifact, "", "", fmt.Errorf("layer %s: %w", l.Digest, err))
		}
		if seen[name] {
			return newError(ReasonInvalidArtifact, "", "", fmt.Errorf("file %q appears twice", name))
		}
		seen[name] = true
		if l.Size < 0 {
			return newError(ReasonInvalidArtifact, "", "", fmt.Errorf("layer %s has a negative size", l.Digest))
		}
		total += l.Size
		if total > MaxArtifactBytes {
			return newError(ReasonTooLarge, "", "", fmt.Errorf("layers exceed the cap of %d bytes", MaxArtifactBytes))
		}
	}
	return nil
}

// fileLayers drops the empty layer oras.PackManifest writes for an artifact
// without files.
func fileLayers(layers []ocispec.Descriptor) []ocispec.Descriptor {
	if len(layers) == 1 && layers[0].Digest == ocispec.DescriptorEmptyJSON.Digest &&
		layers[0].Annotations[ocispec.AnnotationTitle] == "" {
		return nil
	}
	return layers
}

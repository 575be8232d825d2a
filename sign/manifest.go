package sign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
)

// mediaTypeDockerManifest is the Docker image manifest, schema 2.
const mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"

// Resolve returns the descriptor reference (a tag or a digest) points to in repo.
// Resolve a tag once and address the content by the digest from then on: a tag
// can move between two requests, a digest cannot.
func (c *Client) Resolve(ctx context.Context, repo, reference string) (ocispec.Descriptor, error) {
	r, err := c.repository(repo)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, err := r.Resolve(ctx, reference)
	return desc, wrap("resolve", c.ref(repo, reference), err)
}

// FetchManifest returns the image manifest dgst of repo, checked to hash to dgst,
// to be at most MaxManifestBytes and to be an OCI or Docker image manifest.
func (c *Client) FetchManifest(ctx context.Context, repo string, dgst digest.Digest) ([]byte, error) {
	raw, _, err := c.fetchManifest(ctx, repo, dgst)
	return raw, err
}

func (c *Client) fetchManifest(ctx context.Context, repo string, dgst digest.Digest) ([]byte, *ocispec.Manifest, error) {
	ref := c.ref(repo, dgst.String())
	if err := dgst.Validate(); err != nil {
		return nil, nil, newError(ReasonInvalidArtifact, "fetch manifest", ref, err)
	}
	r, err := c.repository(repo)
	if err != nil {
		return nil, nil, err
	}
	desc, rc, err := r.Manifests().FetchReference(ctx, dgst.String())
	if err != nil {
		return nil, nil, wrap("fetch manifest", ref, err)
	}
	defer rc.Close()
	raw, err := readCapped(rc, MaxManifestBytes)
	if err != nil {
		return nil, nil, wrap("fetch manifest", ref, err)
	}
	if got := dgst.Algorithm().FromBytes(raw); got != dgst {
		return nil, nil, newError(ReasonDigestMismatch, "fetch manifest", ref, fmt.Errorf("content hashes to %s", got))
	}
	m, err := parseManifest(raw, desc.MediaType)
	if err != nil {
		return nil, nil, newError(ReasonInvalidArtifact, "fetch manifest", ref, err)
	}
	return raw, m, nil
}

// readCapped reads r to the end, failing with errTooLarge past limit bytes.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("content exceeds the cap of %d bytes: %w", limit, errTooLarge)
	}
	return raw, nil
}

// parseManifest accepts OCI and Docker image manifests. The media type is the
// manifest's own, or the served Content-Type when the manifest names none.
func parseManifest(raw []byte, served string) (*ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	mediaType := m.MediaType
	if mediaType == "" {
		mediaType = served
	}
	if mediaType != ocispec.MediaTypeImageManifest && mediaType != mediaTypeDockerManifest {
		return nil, fmt.Errorf("media type %q is not an OCI or Docker image manifest", mediaType)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("manifest schema version %d is not 2", m.SchemaVersion)
	}
	return &m, nil
}

// fetchBlob reads the blob desc of r, checked against its size, its digest and limit.
func (c *Client) fetchBlob(ctx context.Context, r *remote.Repository, repo string, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	ref := c.ref(repo, desc.Digest.String())
	if desc.Size > limit {
		return nil, newError(ReasonTooLarge, "fetch blob", ref,
			fmt.Errorf("blob of %d bytes exceeds the cap of %d", desc.Size, limit))
	}
	if err := desc.Digest.Validate(); err != nil || desc.Size < 0 {
		return nil, newError(ReasonInvalidArtifact, "fetch blob", ref, fmt.Errorf("invalid descriptor (size %d): %v", desc.Size, err))
	}
	rc, err := r.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, wrap("fetch blob", ref, err)
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	return data, wrap("fetch blob", ref, err)
}

// blob is content to push with its descriptor.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	return blob{desc: content.NewDescriptorFromBytes(mediaType, data), data: data}
}

// pushManifest pushes the blobs the registry lacks, then the manifest, tagged
// when tag is not empty.
func (c *Client) pushManifest(ctx context.Context, r *remote.Repository, repo string, blobs []blob, manifest blob, tag string) error {
	for _, b := range blobs {
		if err := c.pushBlob(ctx, r, repo, b); err != nil {
			return err
		}
	}
	ref := c.ref(repo, manifest.desc.Digest.String())
	var err error
	if tag == "" {
		err = r.Manifests().Push(ctx, manifest.desc, bytes.NewReader(manifest.data))
	} else {
		ref = c.ref(repo, tag)
		err = r.Manifests().PushReference(ctx, manifest.desc, bytes.NewReader(manifest.data), tag)
	}
	return wrap("push manifest", ref, err)
}

func (c *Client) pushBlob(ctx context.Context, r *remote.Repository, repo string, b blob) error {
	ref := c.ref(repo, b.desc.Digest.String())
	exists, err := r.Blobs().Exists(ctx, b.desc)
	if err != nil {
		return wrap("check blob", ref, err)
	}
	if exists {
		return nil
	}
	err = r.Blobs().Push(ctx, b.desc, bytes.NewReader(b.data))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return wrap("push blob", ref, err)
}

// marshalManifest encodes m as a pushable blob.
func marshalManifest(m ocispec.Manifest) (blob, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return blob{}, fmt.Errorf("failed to encode manifest: %w", err)
	}
	return newBlob(m.MediaType, raw), nil
}

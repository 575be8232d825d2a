package sign

import (
	"context"
	"errors"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// Tags lists every tag of repo, following the registry's pages. A repository that
// does not exist has none.
func (c *Client) Tags(ctx context.Context, repo string) ([]string, error) {
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	err = r.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		return nil
	})
	if err != nil && reasonOf(err) == ReasonNotFound {
		return nil, nil // no such repository yet
	}
	return tags, wrap("list tags of", c.host+"/"+repo, err)
}

// Delete deletes the manifest dgst of repo, as the OCI distribution spec deletes
// a manifest: by digest, which removes the tags that point to it (most registries;
// some keep the tag, which then resolves to nothing). A manifest already gone is no
// error. A registry that does not allow deletes fails with ReasonUnsupported.
func (c *Client) Delete(ctx context.Context, repo string, dgst digest.Digest) error {
	ref := c.ref(repo, dgst.String())
	if err := dgst.Validate(); err != nil {
		return newError(ReasonInvalidArtifact, "delete manifest", ref, err)
	}
	r, err := c.repository(repo)
	if err != nil {
		return err
	}
	// No media type: oras deletes the manifest without reading it first (its
	// client-side referrers index is not kept: SkipReferrersGC).
	err = r.Manifests().Delete(ctx, ocispec.Descriptor{Digest: dgst})
	if err != nil && (errors.Is(err, errdef.ErrNotFound) || reasonOf(err) == ReasonNotFound) {
		return nil
	}
	return wrap("delete manifest", ref, err)
}

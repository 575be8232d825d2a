package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/registry/remote"
)

// AnnotationSignature is the layer annotation holding a cosign signature (base64).
const AnnotationSignature = "dev.cosignproject.cosign/signature"

// SignatureTag returns the tag cosign stores the signatures of dgst under, in the
// same repository: "sha256-<hex>.sig".
func SignatureTag(dgst digest.Digest) string {
	return string(dgst.Algorithm()) + "-" + dgst.Encoded() + ".sig"
}

// Sign signs the manifest dgst of repo with key and stores the signature the way
// `cosign sign --key ... --tlog-upload=false` does: a simple-signing payload layer
// with the signature as annotation, in the manifest tagged SignatureTag(dgst).
// Signatures already there are kept; signing again with the same key is a no-op.
// No transparency log entry is made.
func (c *Client) Sign(ctx context.Context, repo string, dgst digest.Digest, key *PrivateKey) error {
	ref := c.ref(repo, dgst.String())
	if key == nil {
		return newError(ReasonInvalidKey, "sign", ref, fmt.Errorf("no signing key"))
	}
	if _, err := c.Resolve(ctx, repo, dgst.String()); err != nil {
		return err
	}
	layer, err := c.signatureLayer(repo, dgst, key)
	if err != nil {
		return newError(ReasonInvalidKey, "sign", ref, err)
	}
	r, err := c.repository(repo)
	if err != nil {
		return err
	}
	existing, err := c.signatureManifest(ctx, r, repo, dgst)
	if err != nil {
		return err
	}
	var layers []ocispec.Descriptor
	if existing != nil {
		layers = existing.Layers
	}
	if signedBy(ctx, layers, layer, dgst, key.Public()) {
		return nil
	}
	return c.pushSignatures(ctx, r, repo, dgst, append(layers, layer.desc), layer)
}

// signatureLayer builds the simple-signing payload for host/repo@dgst and signs it.
func (c *Client) signatureLayer(repo string, dgst digest.Digest, key *PrivateKey) (blob, error) {
	image, err := name.NewDigest(c.host + "/" + repo + "@" + dgst.String())
	if err != nil {
		return blob{}, fmt.Errorf("failed to name the image: %w", err)
	}
	raw, err := payload.Cosign{Image: image}.MarshalJSON()
	if err != nil {
		return blob{}, fmt.Errorf("failed to encode the payload: %w", err)
	}
	sig, err := key.signer.SignMessage(bytes.NewReader(raw))
	if err != nil {
		return blob{}, fmt.Errorf("failed to sign the payload: %w", err)
	}
	b := newBlob(ctypes.SimpleSigningMediaType, raw)
	b.desc.Annotations = map[string]string{AnnotationSignature: base64.StdEncoding.EncodeToString(sig)}
	return b, nil
}

// signedBy reports whether layers hold a signature of the same payload by pub.
func signedBy(ctx context.Context, layers []ocispec.Descriptor, layer blob, dgst digest.Digest, pub *PublicKey) bool {
	for _, l := range layers {
		if l.Digest != layer.desc.Digest {
			continue
		}
		if _, err := verifyPayload(ctx, layer.data, l.Annotations[AnnotationSignature], dgst, []*PublicKey{pub}); err == nil {
			return true
		}
	}
	return false
}

// pushSignatures writes the signature manifest of dgst with the given layers; only
// the new payload and the config are uploaded, the others are in the repository.
func (c *Client) pushSignatures(ctx context.Context, r *remote.Repository, repo string, dgst digest.Digest, layers []ocispec.Descriptor, added blob) error {
	if len(layers) > MaxSignatures {
		return newError(ReasonTooLarge, "sign", c.ref(repo, dgst.String()),
			fmt.Errorf("the digest already has %d signatures, the cap is %d", len(layers)-1, MaxSignatures))
	}
	config, err := signatureConfig(layers)
	if err != nil {
		return err
	}
	manifest, err := marshalManifest(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config.desc,
		Layers:    layers,
	})
	if err != nil {
		return err
	}
	return c.pushManifest(ctx, r, repo, []blob{config, added}, manifest, SignatureTag(dgst))
}

// signatureConfig is the image config cosign writes for a signature manifest: one
// diff ID per layer (the payloads are not compressed).
func signatureConfig(layers []ocispec.Descriptor) (blob, error) {
	cfg := v1.ConfigFile{RootFS: v1.RootFS{Type: "layers"}}
	for _, l := range layers {
		h, err := v1.NewHash(l.Digest.String())
		if err != nil {
			return blob{}, fmt.Errorf("failed to read signature layer digest %s: %w", l.Digest, err)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, h)
		cfg.History = append(cfg.History, v1.History{})
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return blob{}, fmt.Errorf("failed to encode signature config: %w", err)
	}
	return newBlob(ocispec.MediaTypeImageConfig, raw), nil
}

// signatureManifest returns the signature manifest of dgst, or nil when there is
// none. The tag is resolved once and the manifest fetched by digest.
func (c *Client) signatureManifest(ctx context.Context, r *remote.Repository, repo string, dgst digest.Digest) (*ocispec.Manifest, error) {
	tag := SignatureTag(dgst)
	desc, err := r.Resolve(ctx, tag)
	if err != nil {
		err = wrap("resolve signatures", c.ref(repo, tag), err)
		if Reason(err) == ReasonNotFound {
			return nil, nil
		}
		return nil, err
	}
	_, m, err := c.fetchManifest(ctx, repo, desc.Digest)
	return m, err
}

package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/registry/remote"
)

// Result is the outcome of a verification.
type Result struct {
	// Digest is the verified manifest.
	Digest digest.Digest
	// Verified is true when a signature verified with a trusted key.
	Verified bool
	// KeyID is the ID of the key that verified it.
	KeyID string
	// Signatures is the number of signatures found.
	Signatures int
}

// Verify checks that the manifest dgst of repo carries a cosign signature (in the
// manifest tagged SignatureTag(dgst)) whose payload names dgst and which verifies
// with one of keys. It fails closed: no signature is SignatureMissing; a signature
// manifest over MaxManifestBytes or with more than MaxSignatures layers, payloads
// over MaxSignaturePayloadBytes, payloads naming another digest and signatures by
// other keys are SignatureInvalid; a registry failure is returned as such.
// Transparency log, certificates and timestamps are not checked (see the package
// documentation).
func (c *Client) Verify(ctx context.Context, repo string, dgst digest.Digest, keys []*PublicKey) (Result, error) {
	ref := c.ref(repo, dgst.String())
	res := Result{Digest: dgst}
	if len(keys) == 0 || slices.Contains(keys, nil) {
		return res, newError(ReasonInvalidKey, "verify", ref, errors.New("no trusted public keys, or a nil one"))
	}
	layers, err := c.signatureLayers(ctx, repo, dgst)
	if err != nil {
		return res, err
	}
	res.Signatures = len(layers)
	r, err := c.repository(repo)
	if err != nil {
		return res, err
	}
	var t tally
	for _, l := range layers {
		keyID, err := c.checkSignature(ctx, r, repo, l, dgst, keys)
		if err == nil {
			res.Verified, res.KeyID = true, keyID
			return res, nil
		}
		t.add(err)
	}
	return res, t.err(ref, len(keys), len(layers))
}

// signatureLayers returns the simple-signing layers of the signature manifest of
// dgst, within the caps.
func (c *Client) signatureLayers(ctx context.Context, repo string, dgst digest.Digest) ([]ocispec.Descriptor, error) {
	ref := c.ref(repo, dgst.String())
	r, err := c.repository(repo)
	if err != nil {
		return nil, err
	}
	m, err := c.signatureManifest(ctx, r, repo, dgst)
	switch {
	case Reason(err) == ReasonTooLarge || Reason(err) == ReasonInvalidArtifact || Reason(err) == ReasonDigestMismatch:
		return nil, newError(ReasonSignatureInvalid, "verify", ref, err)
	case err != nil:
		return nil, err
	case m == nil:
		return nil, newError(ReasonSignatureMissing, "verify", ref, fmt.Errorf("no cosign signature (tag %s)", SignatureTag(dgst)))
	case len(m.Layers) > MaxSignatures:
		return nil, newError(ReasonSignatureInvalid, "verify", ref,
			fmt.Errorf("signature manifest has %d layers, more than the cap of %d", len(m.Layers), MaxSignatures))
	}
	var layers []ocispec.Descriptor
	for _, l := range m.Layers {
		if l.MediaType == ctypes.SimpleSigningMediaType {
			layers = append(layers, l)
		}
	}
	if len(layers) == 0 {
		return nil, newError(ReasonSignatureMissing, "verify", ref, fmt.Errorf("signature manifest %s has no simple-signing layer", SignatureTag(dgst)))
	}
	return layers, nil
}

// Outcomes of one signature that did not verify.
var (
	errOtherDigest  = errors.New("payload names another digest")
	errNotTrusted   = errors.New("signature does not verify with a trusted key")
	errBadPayload   = errors.New("payload is not a cosign simple-signing payload")
	errNoSignature  = errors.New("layer has no signature annotation")
	errPayloadLarge = fmt.Errorf("payload exceeds the cap of %d bytes", MaxSignaturePayloadBytes)
)

// checkSignature fetches the payload of one signature layer and verifies it.
func (c *Client) checkSignature(ctx context.Context, r *remote.Repository, repo string, l ocispec.Descriptor, dgst digest.Digest, keys []*PublicKey) (string, error) {
	if l.Size > MaxSignaturePayloadBytes {
		return "", errPayloadLarge
	}
	b64 := l.Annotations[AnnotationSignature]
	if b64 == "" {
		return "", errNoSignature
	}
	raw, err := c.fetchBlob(ctx, r, repo, l, MaxSignaturePayloadBytes)
	if err != nil {
		return "", err
	}
	return verifyPayload(ctx, raw, b64, dgst, keys)
}

// verifyPayload checks that the simple-signing payload names dgst and that b64sig
// is its signature by one of keys, with cosign's own verification (no tlog, no
// certificate). It returns the ID of the key.
func verifyPayload(ctx context.Context, raw []byte, b64sig string, dgst digest.Digest, keys []*PublicKey) (string, error) {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(raw, &p); err != nil || p.Critical.Type != payload.CosignSignatureType {
		return "", errBadPayload
	}
	if p.Critical.Image.DockerManifestDigest != dgst.String() {
		return "", fmt.Errorf("%w (%s)", errOtherDigest, p.Critical.Image.DockerManifestDigest)
	}
	h, err := v1.NewHash(dgst.String())
	if err != nil {
		return "", fmt.Errorf("invalid digest %s: %w", dgst, err)
	}
	sig, err := static.NewSignature(raw, b64sig)
	if err != nil {
		return "", fmt.Errorf("failed to read signature: %w", err)
	}
	for _, k := range keys {
		_, err := cosign.VerifyImageSignature(ctx, sig, h, &cosign.CheckOpts{
			SigVerifier: k.verifier, IgnoreTlog: true, IgnoreSCT: true, ClaimVerifier: cosign.SimpleClaimVerifier,
		})
		if err == nil {
			return k.ID(), nil
		}
	}
	return "", errNotTrusted
}

// tally sums up why no signature verified.
type tally struct {
	notTrusted, otherDigest, tooLarge, malformed int
	fetchErr                                     error
}

func (t *tally) add(err error) {
	switch {
	case errors.Is(err, errNotTrusted):
		t.notTrusted++
	case errors.Is(err, errOtherDigest):
		t.otherDigest++
	case errors.Is(err, errPayloadLarge) || Reason(err) == ReasonTooLarge:
		t.tooLarge++
	case Transient(err) || Reason(err) == ReasonUnauthorized:
		t.fetchErr = err
	default:
		t.malformed++
	}
}

// err is the error of a verification where no signature verified: a registry
// failure as itself (the check may pass later), else SignatureInvalid.
func (t *tally) err(ref string, keys, signatures int) error {
	if t.fetchErr != nil {
		return t.fetchErr
	}
	var why []string
	if t.notTrusted > 0 {
		why = append(why, fmt.Sprintf("signed, but not by any of the %d trusted keys", keys))
	}
	if t.otherDigest > 0 {
		why = append(why, fmt.Sprintf("payload names another digest in %d signatures", t.otherDigest))
	}
	if t.tooLarge > 0 {
		why = append(why, fmt.Sprintf("payload exceeds the cap of %d bytes in %d signatures", MaxSignaturePayloadBytes, t.tooLarge))
	}
	if t.malformed > 0 {
		why = append(why, fmt.Sprintf("%d signatures are malformed or unreadable", t.malformed))
	}
	return newError(ReasonSignatureInvalid, "verify", ref,
		fmt.Errorf("none of %d signatures verifies: %s", signatures, strings.Join(why, "; ")))
}

package sign

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// PrivateKey signs with a cosign private key.
type PrivateKey struct {
	signer signature.SignerVerifier
	public *PublicKey
}

// PublicKey verifies cosign signatures made with its private key.
type PublicKey struct {
	verifier signature.Verifier
	der      []byte
	id       string
}

// GenerateKeyPair returns a new cosign key pair (ECDSA P-256): the private key
// encrypted with password as an "ENCRYPTED SIGSTORE PRIVATE KEY" PEM block, as
// `cosign generate-key-pair` writes it, and the public key as PEM.
func GenerateKeyPair(password []byte) (privatePEM, publicPEM []byte, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("failed to generate a cosign key pair: %w", err)
	}
	return keys.PrivateBytes, keys.PublicBytes, nil
}

// LoadPrivateKey decrypts a cosign private key PEM with password.
func LoadPrivateKey(pem, password []byte) (*PrivateKey, error) {
	sv, err := cosign.LoadPrivateKey(pem, password, nil)
	if err != nil {
		return nil, newError(ReasonInvalidKey, "load", "cosign private key", err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, newError(ReasonInvalidKey, "load", "cosign private key", err)
	}
	public, err := newPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{signer: sv, public: public}, nil
}

// LoadPublicKey parses a PEM public key (as `cosign generate-key-pair` writes).
func LoadPublicKey(pem []byte) (*PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, newError(ReasonInvalidKey, "load", "public key", err)
	}
	return newPublicKey(pub)
}

func newPublicKey(pub crypto.PublicKey) (*PublicKey, error) {
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return nil, newError(ReasonInvalidKey, "load", "public key", err)
	}
	// ED25519ph, as cosign signs with ed25519 keys by default.
	v, err := signature.LoadDefaultVerifier(pub, options.WithED25519ph())
	if err != nil {
		return nil, newError(ReasonInvalidKey, "load", "public key", err)
	}
	sum := sha256.Sum256(der)
	return &PublicKey{verifier: v, der: der, id: hex.EncodeToString(sum[:])[:12]}, nil
}

// Public returns the public half of k.
func (k *PrivateKey) Public() *PublicKey { return k.public }

// ID is a short fingerprint of the key: the first 12 hex digits of the SHA-256 of
// its DER encoding.
func (k *PublicKey) ID() string { return k.id }

// String names the key by its ID.
func (k *PublicKey) String() string { return "PublicKey(" + k.id + ")" }

// String names the key by the ID of its public half, never its material.
func (k PrivateKey) String() string { return "PrivateKey(" + k.public.id + ")" }

// GoString is String.
func (k PrivateKey) GoString() string { return k.String() }

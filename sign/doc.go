// Package sign owns cairn's access to OCI registries and its cosign signatures:
// credentials for one registry host, pulling and pushing Helm charts and OCI
// artifacts by digest (oras-go), listing tags and deleting manifests by digest,
// and signing and verifying them with cosign keys.
//
// # Signatures: key-based cosign, offline
//
// Signatures are cosign's classic layout, interoperable with the cosign CLI
// (`cosign sign --key cosign.key --tlog-upload=false`, `cosign verify --key
// cosign.pub --insecure-ignore-tlog`): the manifest tagged "sha256-<hex>.sig" in
// the same repository holds one layer per signature, a simple-signing payload
// that names the signed digest, with the base64 signature as annotation. Keys are
// cosign key pairs (GenerateKeyPair writes what `cosign generate-key-pair` does).
//
// Verification is offline and key-based only. The transparency log (Rekor),
// certificates and their identities (Fulcio, keyless signing), signed timestamps
// and the TUF root are not checked: cairn runs in clusters that may have no route
// to the public Sigstore services, and the trust decision is the platform's list
// of public keys. A signature is accepted when its payload names exactly the
// digest being verified and it verifies with one of the trusted keys; everything
// else fails closed.
//
// # Caps
//
// Nothing read from a registry is unbounded: manifests MaxManifestBytes (4 MiB),
// chart archives MaxChartBytes (10 MiB), artifacts MaxArtifactFiles files and
// MaxArtifactBytes in total, signature manifests MaxSignatures (50) layers and
// each payload MaxSignaturePayloadBytes (64 KiB), each request DefaultTimeout
// unless Endpoint.Timeout says otherwise. Every manifest and blob is checked
// against its digest. Over a cap is an error naming the cap (TooLarge, or
// SignatureInvalid during verification), never a hang.
//
// # Credentials
//
// Credentials come from a Secret (CredentialsFromSecret) or from a docker config
// given explicitly (DockerConfigCredentials); no file is read implicitly and an
// unusable Secret is an error, never anonymous access. A Client offers them to its
// own host only: a redirect to another host or port (a blob store) is followed
// without the Authorization header. The bearer token flow of the registry's
// WWW-Authenticate challenge sends them to the token realm the registry names, as
// every registry client does. Credentials never appear in errors or String output.
//
// Errors are [*Error]s carrying a Reason (Unauthorized, NotFound, FetchFailed,
// DigestMismatch, TooLarge, InvalidArtifact, UnsupportedSecret, SignatureMissing,
// SignatureInvalid, InvalidKey) and naming host/repo@digest.
package sign

package sign

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Reasons carried by [Error]. The reconciler turns them into condition reasons.
const (
	// ReasonUnauthorized: the registry refused the credentials (401/403).
	ReasonUnauthorized = "Unauthorized"
	// ReasonNotFound: the repository, tag, manifest or blob does not exist.
	ReasonNotFound = "NotFound"
	// ReasonFetchFailed: the registry could not be reached or failed (5xx, network,
	// timeout); usually transient, see [Transient].
	ReasonFetchFailed = "FetchFailed"
	// ReasonDigestMismatch: content did not hash to the digest it was fetched by.
	ReasonDigestMismatch = "DigestMismatch"
	// ReasonTooLarge: content is larger than the package's caps.
	ReasonTooLarge = "TooLarge"
	// ReasonInvalidArtifact: a manifest or archive does not have the expected shape
	// (media type, layers, Chart.yaml, file names).
	ReasonInvalidArtifact = "InvalidArtifact"
	// ReasonUnsupportedSecret: a Secret or docker config holds no usable credentials
	// for the registry.
	ReasonUnsupportedSecret = "UnsupportedSecret"
	// ReasonSignatureMissing: the digest has no cosign signature manifest.
	ReasonSignatureMissing = "SignatureMissing"
	// ReasonSignatureInvalid: signatures exist but none verifies with a trusted key
	// for this digest.
	ReasonSignatureInvalid = "SignatureInvalid"
	// ReasonInvalidKey: a key could not be loaded (bad PEM, wrong password, no keys).
	ReasonInvalidKey = "InvalidKey"
	// ReasonUnsupported: the registry does not allow the operation (405, or the
	// error code UNSUPPORTED), e.g. deletes on a registry without them enabled.
	ReasonUnsupported = "Unsupported"
)

// Error is the error of every operation of this package. It names the host,
// repository and digest (or tag) involved, never credentials.
type Error struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Op is what failed, e.g. "pull chart".
	Op string
	// Ref is the object, e.g. "registry.example.com/charts/podinfo@sha256:...".
	Ref string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("failed to %s %s (%s): %v", e.Op, e.Ref, e.Reason, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the reason of the first [*Error] in err's chain, or "" when there is none.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Transient reports whether retrying the operation later may succeed: the registry
// failed or could not be reached, as opposed to refusing the request for good.
func Transient(err error) bool {
	if Reason(err) != ReasonFetchFailed {
		return false
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode == http.StatusRequestTimeout
	}
	return true
}

func newError(reason, op, ref string, err error) *Error {
	return &Error{Reason: reason, Op: op, Ref: ref, Err: err}
}

// wrap gives err a reason derived from what the registry answered; an err that is
// already an [*Error] is returned unchanged.
func wrap(op, ref string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return newError(reasonOf(err), op, ref, err)
}

func reasonOf(err error) string {
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp):
		return reasonOfResponse(resp)
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return ReasonUnauthorized
	case errors.Is(err, errdef.ErrNotFound):
		return ReasonNotFound
	case errors.Is(err, errdef.ErrSizeExceedsLimit), errors.Is(err, errTooLarge):
		return ReasonTooLarge
	case errors.Is(err, content.ErrMismatchedDigest), errors.Is(err, content.ErrTrailingData),
		// oras reports a Docker-Content-Digest header that differs from the
		// requested digest with an untyped error.
		strings.Contains(err.Error(), "digest mismatch"):
		return ReasonDigestMismatch
	}
	return ReasonFetchFailed
}

func reasonOfResponse(resp *errcode.ErrorResponse) string {
	for _, e := range resp.Errors {
		switch e.Code {
		case errcode.ErrorCodeUnauthorized, errcode.ErrorCodeDenied:
			return ReasonUnauthorized
		case errcode.ErrorCodeManifestUnknown, errcode.ErrorCodeNameUnknown, errcode.ErrorCodeBlobUnknown:
			return ReasonNotFound
		case errcode.ErrorCodeUnsupported:
			return ReasonUnsupported
		}
	}
	switch resp.StatusCode {
	case http.StatusMethodNotAllowed:
		return ReasonUnsupported
	case http.StatusUnauthorized, http.StatusForbidden:
		return ReasonUnauthorized
	case http.StatusNotFound:
		return ReasonNotFound
	}
	return ReasonFetchFailed
}

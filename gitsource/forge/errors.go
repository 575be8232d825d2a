package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrInvalid marks a request cairn refuses to send (an unknown state, a
// malformed SHA or repository name). Retrying it cannot succeed.
var ErrInvalid = errors.New("invalid forge request")

// Reasons carried by APIError.Reason, in the CamelCase form the reconciler
// uses for conditions.
const (
	ReasonRateLimited      = "ForgeRateLimited"
	ReasonUnavailable      = "ForgeUnavailable"
	ReasonUnauthorized     = "ForgeUnauthorized"
	ReasonNotFound         = "ForgeNotFound"
	ReasonRejected         = "ForgeRejected"
	ReasonInvalidResponse  = "ForgeInvalidResponse"
	ReasonForbiddenRequest = "ForgeForbidden"
)

// APIError is an HTTP answer from a forge API that was not a success. Its
// message never holds the client's token.
type APIError struct {
	// Op says what cairn was doing ("set status cairn/sync on o/r@0123abc").
	Op string
	// Method and URL of the request (URL without query or credentials).
	Method string
	URL    string
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the forge's own message, redacted and cut.
	Message string
	// RateLimited is true for 429 and for 403 answers that carry a rate
	// limit signal (Retry-After, or a remaining quota of zero).
	RateLimited bool
	// RetryAfter is how long the forge asked to wait (Retry-After, or the
	// time until the rate limit resets); zero when it did not say.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("failed to %s: %s %s: %d %s", e.Op, e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Reason classifies the error for conditions and logs.
func (e *APIError) Reason() string {
	switch {
	case e.RateLimited:
		return ReasonRateLimited
	case e.StatusCode >= 500:
		return ReasonUnavailable
	case e.StatusCode == http.StatusUnauthorized:
		return ReasonUnauthorized
	case e.StatusCode == http.StatusForbidden:
		return ReasonForbiddenRequest
	case e.StatusCode == http.StatusNotFound:
		return ReasonNotFound
	case e.StatusCode < 300:
		return ReasonInvalidResponse
	default:
		return ReasonRejected
	}
}

// Temporary is true when the same request may succeed later: rate limits,
// 5xx answers and 408 timeouts.
func (e *APIError) Temporary() bool {
	return e.RateLimited || e.StatusCode >= 500 || e.StatusCode == http.StatusRequestTimeout
}

// Retryable reports whether a failed forge call is worth retrying, and how
// long the forge asked to wait (zero when it did not say). Transport errors
// (refused connections, timeouts, resets) are retryable; ErrInvalid, a
// cancelled context and permanent API answers (401, 403 without a rate limit
// signal, 404, 422) are not.
func Retryable(err error) (bool, time.Duration) {
	var apiErr *APIError
	switch {
	case err == nil, errors.Is(err, ErrInvalid), errors.Is(err, context.Canceled):
		return false, 0
	case errors.As(err, &apiErr):
		return apiErr.Temporary(), apiErr.RetryAfter
	default:
		return true, 0
	}
}

// IsRateLimited reports whether err is a rate-limit answer.
func IsRateLimited(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.RateLimited
}

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// FailureKind says how a failure is retried.
type FailureKind string

const (
	// Transient failures (network, API 5xx/429, conflicts) are retried with backoff.
	Transient FailureKind = "Transient"
	// Waiting failures (a dependency not ready) are requeued.
	Waiting FailureKind = "Waiting"
	// Stalled failures (bad declaration, render error, forbidden) need a new commit.
	Stalled FailureKind = "Stalled"
	// Progressing is no failure: the objects were applied and are not Current yet
	// when the sync stops waiting (Options.HealthWait); a later sync checks them again
	// within the instance's timeout.
	Progressing FailureKind = "Progressing"
)

// Failure is an error with its kind and the condition reason it is reported with.
type Failure struct {
	Kind   FailureKind
	Reason string
	Err    error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

func stalled(reason string, err error) *Failure {
	return &Failure{Kind: Stalled, Reason: reason, Err: err}
}
func waiting(reason string, err error) *Failure {
	return &Failure{Kind: Waiting, Reason: reason, Err: err}
}
func transient(reason string, err error) *Failure {
	return &Failure{Kind: Transient, Reason: reason, Err: err}
}

// classify wraps err as a Failure with reason, choosing the kind from the error:
// errors from the API server that will not heal by retrying stall, the rest are transient.
func classify(reason string, err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	if isTransient(err) {
		return transient(reason, err)
	}
	return stalled(reason, err)
}

func isTransient(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return true
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsConflict(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	case errors.As(err, &netErr):
		return true
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return true // gone soon (a Namespace a failed sync created and took back): the next try creates it again
	}
	return isConnectionError(err)
}

func isConnectionError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, net.ErrClosed)
}

// failuref builds a Failure with a formatted message.
func failuref(kind FailureKind, reason, format string, args ...any) *Failure {
	return &Failure{Kind: kind, Reason: reason, Err: fmt.Errorf(format, args...)}
}

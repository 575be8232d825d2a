// Package outcome is the typed outcome of cairn's work on an instance: how a failure
// is retried (Kind), the condition reason it is reported with (Failure), the
// classifiers that choose the kind from an error, what a sync or a plan did or
// would do to an instance (Action, PlanAction), and the result of a sync
// (SyncResult, InstanceResult). It sits at the bottom of the
// engine's packages so that every layer above (the apply layer, the revision step,
// the instance reconcile, the loop) speaks the same outcome; see
// docs/architecture.md.
package outcome

import (
	"context"
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kind says how a failure is retried.
type Kind string

const (
	// Transient failures (network, API 5xx/429, conflicts) are retried with backoff.
	Transient Kind = "Transient"
	// Waiting failures (a dependency not ready) are requeued.
	Waiting Kind = "Waiting"
	// Stalled failures (bad declaration, render error, forbidden) need a new commit.
	Stalled Kind = "Stalled"
	// Progressing is no failure: the objects were applied and are not Current yet
	// when the sync stops waiting (Options.HealthWait); a later sync checks them again
	// within the instance's timeout.
	Progressing Kind = "Progressing"
)

// Failure is an error with its kind and the condition reason it is reported with.
type Failure struct {
	Kind   Kind
	Reason string
	Err    error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// NewStalled is a failure that needs a new commit.
func NewStalled(reason string, err error) *Failure {
	return &Failure{Kind: Stalled, Reason: reason, Err: err}
}

// NewWaiting is a failure that is requeued until what it waits on is ready.
func NewWaiting(reason string, err error) *Failure {
	return &Failure{Kind: Waiting, Reason: reason, Err: err}
}

// NewTransient is a failure retried with backoff.
func NewTransient(reason string, err error) *Failure {
	return &Failure{Kind: Transient, Reason: reason, Err: err}
}

// Failuref builds a Failure with a formatted message.
func Failuref(kind Kind, reason, format string, args ...any) *Failure {
	return &Failure{Kind: kind, Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Classify wraps err as a Failure with reason, choosing the kind from the error:
// errors from the API server that will not heal by retrying stall, the rest are
// transient. A Failure already is one and is returned as it is.
func Classify(reason string, err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	if IsTransient(err) {
		return NewTransient(reason, err)
	}
	return NewStalled(reason, err)
}

// IsTransient reports whether err heals by retrying: a deadline, an API server
// that is overloaded, failing or in conflict, the network, or a namespace being
// deleted.
func IsTransient(err error) bool {
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
	return IsConnectionError(err)
}

// IsConnectionError reports whether err is a failure to reach the other end.
func IsConnectionError(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, net.ErrClosed)
}

package gitsource

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Typed errors. Every error returned by this package wraps at most one of them
// (test with errors.Is) and names the URL (without credentials) and, for tree
// errors, the path.
var (
	// ErrUnsafePath: a symlink, gitlink, special file or a path with "..",
	// ".git", an absolute name, a backslash or a control character.
	ErrUnsafePath = errors.New("unsafe path")
	// ErrTooLarge: a file, the tree, the file count or a fetch over Limits.
	ErrTooLarge = errors.New("source too large")
	// ErrRefNotFound: the branch does not exist on the remote.
	ErrRefNotFound = errors.New("ref not found")
	// ErrUnknownRevision: the commit is not in the cache (or not in the history
	// of the fetched branch).
	ErrUnknownRevision = errors.New("unknown revision")
	// ErrUnsupportedURL: a scheme other than https, ssh, file (and http with
	// AllowHTTP), a transport helper ("ext::") or an argument-like URL.
	ErrUnsupportedURL = errors.New("unsupported url")
	// ErrAuth: the remote refused the credentials (HTTP 401/403, ssh
	// authentication or host key verification), or Auth is inconsistent.
	ErrAuth = errors.New("authentication failed")
	// ErrTimeout: a network step ran past Options.Timeout.
	ErrTimeout = errors.New("timeout")
	// ErrUnsupportedContent: a file the tree cannot represent, such as a Git
	// LFS pointer (the LFS object is never downloaded).
	ErrUnsupportedContent = errors.New("unsupported content")
)

// reasons maps each typed error to its CamelCase reason, in priority order.
var reasons = []struct {
	err    error
	reason string
}{
	{ErrTimeout, "Timeout"},
	{ErrAuth, "AuthFailed"},
	{ErrUnsupportedURL, "UnsupportedURL"},
	{ErrRefNotFound, "RefNotFound"},
	{ErrUnknownRevision, "UnknownRevision"},
	{ErrUnsafePath, "UnsafePath"},
	{ErrUnsupportedContent, "UnsupportedContent"},
	{ErrTooLarge, "SourceTooLarge"},
}

// Reason returns the CamelCase reason of err: UnsafePath, SourceTooLarge,
// RefNotFound, UnknownRevision, UnsupportedURL, UnsupportedContent,
// AuthFailed, Timeout, or FetchFailed for anything else. It returns "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "FetchFailed"
}

// maxCauseLen bounds how much of a remote's message ends up in an error.
const maxCauseLen = 512

// scrubbedError hides secrets and bounds the text of a wrapped cause while
// keeping it available to errors.Is and errors.As.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with every secret replaced by "REDACTED" in its message.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(err.Error())
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
		}
	}
	if len(msg) > maxCauseLen {
		msg = msg[:maxCauseLen] + "..."
	}
	return &scrubbedError{msg: msg, err: err}
}

// classify attaches the typed error that describes a failed network step.
// ctx is the step's context: a passed deadline is a timeout whatever error
// the transport reported for it.
func classify(ctx context.Context, err error) error {
	var netErr net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return joinTyped(ErrTimeout, err)
	case errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		isSSHAuthError(err):
		return joinTyped(ErrAuth, err)
	}
	return err
}

// isSSHAuthError reports a failed ssh user or host key authentication, which
// x/crypto/ssh only reports as text.
func isSSHAuthError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "ssh: unable to authenticate") ||
		strings.Contains(msg, "knownhosts:") ||
		strings.Contains(msg, "ssh: host key mismatch")
}

// typedError puts a typed error in front of its cause: "timeout: <cause>".
type typedError struct {
	typed error
	cause error
}

func (e *typedError) Error() string   { return e.typed.Error() + ": " + e.cause.Error() }
func (e *typedError) Unwrap() []error { return []error{e.typed, e.cause} }

func joinTyped(typed, cause error) error {
	if errors.Is(cause, typed) {
		return cause
	}
	return &typedError{typed: typed, cause: cause}
}

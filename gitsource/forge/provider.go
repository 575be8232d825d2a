package forge

import (
	"net/http"
)

// Provider is one kind of forge (Gitea, GitHub, GitLab, ...): it builds the
// API client cairn posts through and owns the forge's webhooks, how they are
// signed and what their payloads say. Each forge's package holds one Provider
// type; a Registry lists them by name, so the CLI and the Receiver never name
// a forge themselves.
type Provider interface {
	// Name is the forge's name: the value of --forge, the hook path
	// /hooks/<name> and the Source of the events it parses. It is a lowercase
	// path segment ([a-z0-9-]).
	Name() string
	// NewForge returns an API client for opts.
	NewForge(opts ClientOptions) (Forge, error)
	// CommentLimit is the size, in bytes, a plan comment is cut to (see
	// PlanComment).
	CommentLimit() int
	Webhook
}

// ClientOptions configure the API client a Provider builds.
type ClientOptions struct {
	// BaseURL is the forge's URL; empty for the provider's default (when it
	// has one: github.com, gitlab.com).
	BaseURL string
	// Token is the access token; it is never logged.
	Token string
	// Login is the account the token posts as, whose plan comment is
	// edited; asked of the forge when empty.
	Login string
	// HTTPClient sends the requests; nil for a client with a 30 s timeout.
	HTTPClient *http.Client
}

// Webhook is how a forge signs and describes its webhook deliveries. The
// Receiver calls, in order: Signed (before the body is read), Verify, then
// EventType and Parse on the authenticated payload.
type Webhook interface {
	// Signed reports whether h carries the signature (or token) header at
	// all; a delivery without one is refused before its body is read.
	Signed(h http.Header) bool
	// Verify authenticates a delivery: its headers and raw body against the
	// webhook secret, in constant time. It returns ErrNoSignature or
	// ErrBadSignature.
	Verify(secret string, h http.Header, body []byte) error
	// EventType is the delivery's event type as the forge names it ("push",
	// "Push Hook"), from its headers.
	EventType(h http.Header) string
	// DeliveryID is the forge's id of the delivery, "" when it sent none.
	DeliveryID(h http.Header) string
	// Parse turns the JSON payload of an authenticated delivery of eventType
	// into a Push or a PullRequest whose Source is the provider's name. A
	// well-formed delivery cairn does not act on returns an *IgnoredError
	// (see Ignore); a malformed one, any other error. It never panics.
	Parse(eventType string, payload []byte) (Event, error)
}

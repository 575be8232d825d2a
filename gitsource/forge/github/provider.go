package github

import (
	"net/http"
	"strings"

	"cairn.dev/cairn/gitsource/forge"
)

// Name is GitHub's provider name: --forge github, /hooks/github and the
// Source of its events.
const Name = "github"

// signatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body.
const signatureHeader = "X-Hub-Signature-256"

// Provider is GitHub's forge.Provider: Clients (github.com unless a base URL
// is given), and webhooks signed in X-Hub-Signature-256.
type Provider struct{}

var _ forge.Provider = Provider{}

// Name implements forge.Provider.
func (Provider) Name() string { return Name }

// CommentLimit implements forge.Provider.
func (Provider) CommentLimit() int { return CommentLimit }

// NewForge implements forge.Provider.
func (Provider) NewForge(opts forge.ClientOptions) (forge.Forge, error) {
	return New(opts)
}

// Signed implements forge.Webhook.
func (Provider) Signed(h http.Header) bool { return h.Get(signatureHeader) != "" }

// Verify implements forge.Webhook: X-Hub-Signature-256 is "sha256=" and the
// hex HMAC-SHA256 of the body. The SHA-1 X-Hub-Signature is not accepted.
func (Provider) Verify(secret string, h http.Header, body []byte) error {
	sig := h.Get(signatureHeader)
	if sig == "" {
		return forge.ErrNoSignature
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return forge.ErrBadSignature
	}
	return forge.VerifyHMAC(secret, hexSig, body)
}

// EventType implements forge.Webhook (X-GitHub-Event).
func (Provider) EventType(h http.Header) string { return h.Get("X-GitHub-Event") }

// DeliveryID implements forge.Webhook (X-GitHub-Delivery).
func (Provider) DeliveryID(h http.Header) string { return h.Get("X-GitHub-Delivery") }

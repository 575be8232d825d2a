package gitea

import (
	"fmt"
	"net/http"

	"cairn.dev/cairn/gitsource/forge"
)

// Name is Gitea's provider name: --forge gitea, /hooks/gitea and the Source
// of its events.
const Name = "gitea"

// Provider is Gitea's forge.Provider: Clients, and webhooks signed with the
// hex HMAC-SHA256 of the body in X-Gitea-Signature.
type Provider struct{}

var _ forge.Provider = Provider{}

// Name implements forge.Provider.
func (Provider) Name() string { return Name }

// CommentLimit implements forge.Provider.
func (Provider) CommentLimit() int { return CommentLimit }

// NewForge implements forge.Provider; Gitea has no default URL, so
// opts.BaseURL is required.
func (Provider) NewForge(opts forge.ClientOptions) (forge.Forge, error) {
	if opts.BaseURL == "" {
		return nil, fmt.Errorf("%w: a gitea client needs the server's URL", forge.ErrInvalid)
	}
	return New(opts)
}

// signatureHeader carries the hex HMAC-SHA256 of the body.
const signatureHeader = "X-Gitea-Signature"

// Signed implements forge.Webhook.
func (Provider) Signed(h http.Header) bool { return h.Get(signatureHeader) != "" }

// Verify implements forge.Webhook: X-Gitea-Signature is the hex
// HMAC-SHA256 of the body.
func (Provider) Verify(secret string, h http.Header, body []byte) error {
	return forge.VerifyHMAC(secret, h.Get(signatureHeader), body)
}

// EventType implements forge.Webhook (X-Gitea-Event).
func (Provider) EventType(h http.Header) string { return h.Get("X-Gitea-Event") }

// DeliveryID implements forge.Webhook (X-Gitea-Delivery).
func (Provider) DeliveryID(h http.Header) string { return h.Get("X-Gitea-Delivery") }

package gitlab

import (
	"net/http"

	"cairn.dev/cairn/gitsource/forge"
)

// Name is GitLab's provider name: --forge gitlab, /hooks/gitlab and the
// Source of its events.
const Name = "gitlab"

// tokenHeader carries the webhook's secret token itself.
const tokenHeader = "X-Gitlab-Token"

// Provider is GitLab's forge.Provider: Clients (gitlab.com unless a base URL
// is given), and webhooks that carry the shared token in X-Gitlab-Token.
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
func (Provider) Signed(h http.Header) bool { return h.Get(tokenHeader) != "" }

// Verify implements forge.Webhook: X-Gitlab-Token must equal the secret
// (compared in constant time); the body is not signed.
func (Provider) Verify(secret string, h http.Header, _ []byte) error {
	return forge.VerifyToken(secret, h.Get(tokenHeader))
}

// EventType implements forge.Webhook (X-Gitlab-Event).
func (Provider) EventType(h http.Header) string { return h.Get("X-Gitlab-Event") }

// DeliveryID implements forge.Webhook: X-Gitlab-Event-UUID, or
// Idempotency-Key on versions that send it.
func (Provider) DeliveryID(h http.Header) string {
	if id := h.Get("Idempotency-Key"); id != "" {
		return id
	}
	return h.Get("X-Gitlab-Event-UUID")
}

package forge

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

var (
	errNoSignature  = errors.New("missing signature")
	errBadSignature = errors.New("invalid signature")
)

// verifyGitea checks X-Gitea-Signature: the hex HMAC-SHA256 of the body.
func verifyGitea(secret string, h http.Header, body []byte) error {
	return verifyHMAC(secret, h.Get("X-Gitea-Signature"), body)
}

// verifyGitHub checks X-Hub-Signature-256: "sha256=" and the hex
// HMAC-SHA256 of the body. The SHA-1 X-Hub-Signature is not accepted.
func verifyGitHub(secret string, h http.Header, body []byte) error {
	sig := h.Get("X-Hub-Signature-256")
	if sig == "" {
		return errNoSignature
	}
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return errBadSignature
	}
	return verifyHMAC(secret, hexSig, body)
}

func verifyHMAC(secret, hexSig string, body []byte) error {
	if hexSig == "" {
		return errNoSignature
	}
	got, err := hex.DecodeString(strings.TrimSpace(hexSig))
	if err != nil {
		return errBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errBadSignature
	}
	return nil
}

// verifyGitLab checks X-Gitlab-Token against the secret. Both are hashed
// first so that the comparison takes the same time whatever their lengths.
func verifyGitLab(secret string, h http.Header, _ []byte) error {
	token := h.Get("X-Gitlab-Token")
	if token == "" {
		return errNoSignature
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return errBadSignature
	}
	return nil
}

// gitlabDelivery is GitLab's delivery id: X-Gitlab-Event-UUID, or
// Idempotency-Key on versions that send it.
func gitlabDelivery(h http.Header) string {
	if id := h.Get("Idempotency-Key"); id != "" {
		return id
	}
	return h.Get("X-Gitlab-Event-UUID")
}

// formPayload returns the JSON of a delivery: the body itself, or its
// "payload" field when the hook was configured to send a form (Gitea and
// GitHub offer application/x-www-form-urlencoded). The signature covers the
// raw body in both cases.
func formPayload(h http.Header, body []byte) ([]byte, error) {
	ct := strings.ToLower(strings.TrimSpace(strings.Split(h.Get("Content-Type"), ";")[0]))
	if ct != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		return nil, errors.New("form body without a payload field")
	}
	return []byte(form.Get("payload")), nil
}

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

// The errors a Webhook's Verify returns; the Receiver answers 401 with their
// message.
var (
	// ErrNoSignature: the delivery carries no signature or token.
	ErrNoSignature = errors.New("missing signature")
	// ErrBadSignature: the signature or token does not match the secret.
	ErrBadSignature = errors.New("invalid signature")
)

// VerifyHMAC checks hexSig, the hex HMAC-SHA256 of body keyed with secret,
// in constant time.
func VerifyHMAC(secret, hexSig string, body []byte) error {
	if hexSig == "" {
		return ErrNoSignature
	}
	got, err := hex.DecodeString(strings.TrimSpace(hexSig))
	if err != nil {
		return ErrBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return ErrBadSignature
	}
	return nil
}

// VerifyToken checks a shared token against secret. Both are hashed first so
// that the comparison takes the same time whatever their lengths.
func VerifyToken(secret, token string) error {
	if token == "" {
		return ErrNoSignature
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return ErrBadSignature
	}
	return nil
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

package secretgen

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// Encodings of a random value.
const (
	Alphanumeric = "alphanumeric"
	Hex          = "hex"
	Base64       = "base64"
)

const alphanumeric = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Random returns a string of exactly length characters, each drawn uniformly from
// crypto/rand out of the encoding's alphabet: alphanumeric ("" too: A-Z, a-z, 0-9),
// hex (0-9, a-f) or base64 (the standard alphabet A-Z, a-z, 0-9, + and /, no padding).
func Random(length int, encoding string) (string, error) {
	if length < 1 {
		return "", fmt.Errorf("failed to generate a random value: length %d is not positive", length)
	}
	switch encoding {
	case "", Alphanumeric:
		return randomAlphanumeric(length)
	case Hex:
		b, err := randomBytes((length + 1) / 2)
		return truncate(hex.EncodeToString(b), length), err
	case Base64:
		b, err := randomBytes((length*3 + 3) / 4)
		return truncate(base64.RawStdEncoding.EncodeToString(b), length), err
	}
	return "", fmt.Errorf("failed to generate a random value: unknown encoding %q (alphanumeric, hex or base64)", encoding)
}

// randomAlphanumeric draws bytes and keeps those below the largest multiple of 62
// (rejection sampling), so every character is equally likely.
func randomAlphanumeric(length int) (string, error) {
	const limit = 256 - 256%len(alphanumeric)
	out := make([]byte, 0, length)
	buf := make([]byte, length+length/4+8)
	for len(out) < length {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("failed to read random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < length {
				out = append(out, alphanumeric[int(b)%len(alphanumeric)])
			}
		}
	}
	return string(out), nil
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("failed to read random bytes: %w", err)
	}
	return b, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

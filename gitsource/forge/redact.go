package forge

import (
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces a secret in text that Redact cleaned.
const Redacted = "[REDACTED]"

// Redact returns s with every occurrence of each non-empty secret (and of its
// URL-escaped forms) replaced by Redacted. Longer secrets are replaced first,
// so a secret that contains another is removed whole.
func Redact(s string, secrets ...string) string {
	forms := make([]string, 0, 3*len(secrets))
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		forms = append(forms, secret, url.QueryEscape(secret), url.PathEscape(secret))
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	for _, form := range forms {
		s = strings.ReplaceAll(s, form, Redacted)
	}
	return s
}

// Description prepares a commit status description for a forge whose limit
// is limit bytes: secrets redacted, control characters and line breaks turned
// into spaces, runs of spaces collapsed, and the result cut at a character
// boundary (between words when one ends near it) with a trailing "…" when it
// is too long. Limits are in bytes,
// which never exceed the characters (or UTF-16 units) a forge counts.
func Description(desc string, limit int, secrets ...string) string {
	desc = Redact(desc, secrets...)
	desc = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(desc, "\uFFFD"))
	desc = strings.Join(strings.Fields(desc), " ")
	if len(desc) <= limit {
		return desc
	}
	const ellipsis = "…"
	if limit < len(ellipsis) {
		return cut(desc, limit)
	}
	return cutWords(desc, limit-len(ellipsis)) + ellipsis
}

// cutWords cuts s to at most n bytes, at the last space when one is within
// the last 24 bytes (so that a word is not split), at a character boundary
// otherwise.
func cutWords(s string, n int) string {
	s = cut(s, n)
	if i := strings.LastIndexByte(s, ' '); i > 0 && len(s)-i <= 24 {
		s = s[:i]
	}
	return strings.TrimRight(s, " ")
}

// cut returns the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

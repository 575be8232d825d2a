package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Message extracts the forge's message from an error body: the "message"
// (GitHub, Gitea, GitLab) or "error" (GitLab) field of a JSON object, or the
// start of a non-JSON body; flattened to one line and cut to 300 bytes.
func Message(body []byte) string {
	var obj map[string]any
	msg := string(body)
	if json.Unmarshal(body, &obj) == nil {
		switch {
		case obj["message"] != nil:
			msg = flatten(obj["message"])
		case obj["error"] != nil:
			msg = flatten(obj["error"])
		}
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(msg, "?"))
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "") + "…"
	}
	return msg
}

// flatten renders a JSON message that may be a string, a list or an object
// (GitLab answers {"message": {"base": ["..."]}}).
func flatten(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// RateLimit reads the rate-limit signals of an answer. 429 is always a rate
// limit; 403 is one when it carries Retry-After or a remaining quota of zero
// (X-RateLimit-Remaining on GitHub and Gitea, RateLimit-Remaining on GitLab).
// The wait is Retry-After (seconds or an HTTP date) when present, otherwise
// the time until X-RateLimit-Reset or RateLimit-Reset (Unix seconds).
func RateLimit(status int, h http.Header, now time.Time) (bool, time.Duration) {
	retryAfter, hasRetryAfter := parseRetryAfter(h.Get("Retry-After"), now)
	exhausted := h.Get("X-RateLimit-Remaining") == "0" || h.Get("RateLimit-Remaining") == "0"
	limited := status == http.StatusTooManyRequests ||
		(status == http.StatusForbidden && (hasRetryAfter || exhausted))
	if !limited {
		return false, 0
	}
	if hasRetryAfter {
		return true, retryAfter
	}
	for _, name := range []string{"X-RateLimit-Reset", "RateLimit-Reset"} {
		if d, ok := parseReset(h.Get(name), now); ok {
			return true, d
		}
	}
	return true, 0
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
		return clampSeconds(secs), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return nonNegative(t.Sub(now)), true
	}
	return 0, false
}

// parseReset reads a reset time: Unix seconds, or (for values too small to
// be a date) seconds from now.
func parseReset(v string, now time.Time) (time.Duration, bool) {
	secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || secs < 0 {
		return 0, false
	}
	if secs < 1_000_000_000 {
		return clampSeconds(secs), true
	}
	return nonNegative(time.Unix(secs, 0).Sub(now)), true
}

// clampSeconds turns seconds into a Duration without overflow (at most a day).
func clampSeconds(secs int64) time.Duration {
	const day = 24 * 60 * 60
	if secs > day {
		secs = day
	}
	return time.Duration(secs) * time.Second
}

func nonNegative(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return min(d, 24*time.Hour)
}

package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestRateLimit(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		header  http.Header
		limited bool
		wait    time.Duration
	}{
		{"429 without hints", 429, nil, true, 0},
		{"429 retry-after seconds", 429, http.Header{"Retry-After": {"7"}}, true, 7 * time.Second},
		{"429 retry-after date", 429, http.Header{"Retry-After": {now.Add(time.Minute).Format(http.TimeFormat)}}, true, time.Minute},
		{"429 retry-after in the past", 429, http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, true, 0},
		{"403 github primary", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1795953720"}}, true, 2 * time.Minute},
		{"403 gitlab reset", 403, http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"1795953630"}}, true, 30 * time.Second},
		{"403 reset as delta", 403, http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"12"}}, true, 12 * time.Second},
		{"403 huge retry-after is clamped", 403, http.Header{"Retry-After": {"99999999999"}}, true, 24 * time.Hour},
		{"403 forbidden", 403, http.Header{"X-Ratelimit-Remaining": {"10"}}, false, 0},
		{"500", 500, http.Header{"Retry-After": {"5"}}, false, 0},
		{"429 garbage retry-after", 429, http.Header{"Retry-After": {"soon"}}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			limited, wait := RateLimit(tt.status, tt.header, now)
			g.Expect(limited).To(Equal(tt.limited))
			g.Expect(wait).To(Equal(tt.wait))
		})
	}
}

func TestNextPage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(NextPage(http.Header{"X-Next-Page": {"3"}})).To(Equal(3))
	g.Expect(NextPage(http.Header{"X-Next-Page": {""}})).To(Equal(0))
	g.Expect(NextPage(http.Header{"Link": {`<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?per_page=100&page=4>; rel="next"`}})).To(Equal(4))
	g.Expect(NextPage(http.Header{"Link": {`<https://api.github.com/x?page=1>; rel="first"`}})).To(Equal(0))
	g.Expect(NextPage(nil)).To(Equal(0))
}

func TestMessage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Message([]byte(`{"message":"Not Found","documentation_url":"x"}`))).To(Equal("Not Found"))
	g.Expect(Message([]byte(`{"message":{"base":["Cannot transition status"]}}`))).To(Equal(`{"base":["Cannot transition status"]}`))
	g.Expect(Message([]byte(`{"error":"invalid_token"}`))).To(Equal("invalid_token"))
	g.Expect(Message([]byte("<html>\n<body>502 Bad Gateway</body>\n</html>"))).To(Equal("<html> <body>502 Bad Gateway</body> </html>"))
	long := Message([]byte(strings.Repeat("é", 400)))
	g.Expect(len(long)).To(BeNumerically("<=", 303))
}

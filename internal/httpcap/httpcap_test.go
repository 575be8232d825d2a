package httpcap

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCap(t *testing.T) {
	body := strings.Repeat("x", 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length: the body cap decides
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path  string
		limit int64
		ok    bool
	}{{"/", 100, true}, {"/", 99, false}, {"/chunked", 100, true}, {"/chunked", 99, false}} {
		c := &http.Client{Transport: Transport{Next: http.DefaultTransport, Limit: tc.limit}}
		resp, err := c.Get(srv.URL + tc.path)
		if err == nil {
			var data []byte
			data, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && string(data) != body {
				t.Fatalf("%s cap %d: read %d bytes", tc.path, tc.limit, len(data))
			}
		}
		if tc.ok && err != nil {
			t.Fatalf("%s cap %d: %v", tc.path, tc.limit, err)
		}
		if !tc.ok && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s cap %d: want ErrTooLarge, got %v", tc.path, tc.limit, err)
		}
	}
}

// Package httpcap caps the size of HTTP response bodies: a last line of defence,
// behind per-operation caps, against a server that streams without end.
package httpcap

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrTooLarge is wrapped by the errors of a response over the cap.
var ErrTooLarge = errors.New("content too large")

// Transport fails a response whose body is, or grows, over Limit bytes.
type Transport struct {
	Next  http.RoundTripper
	Limit int64
}

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.Limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: response of %d bytes exceeds the cap of %d: %w",
			req.Method, req.URL.Redacted(), resp.ContentLength, t.Limit, ErrTooLarge)
	}
	resp.Body = &body{ReadCloser: resp.Body, left: t.Limit}
	return resp, nil
}

type body struct {
	io.ReadCloser
	left int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var probe [1]byte
		if n, err := b.ReadCloser.Read(probe[:]); n == 0 && err == io.EOF {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("response body exceeds the cap: %w", ErrTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

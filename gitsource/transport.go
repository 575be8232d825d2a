package gitsource

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// maxErrorBody bounds how much of an HTTP error response is read.
const maxErrorBody = 64 << 10

// newTransport returns the go-git transport of r's scheme, built for this
// Source only (go-git's global protocol table is never touched). byteLimit
// bounds what one session may receive.
func newTransport(r *remote, withCreds bool, byteLimit int64) transport.Transport {
	switch r.endpoint.Protocol {
	case "http", "https":
		return newHTTPTransport(withCreds, byteLimit)
	case "ssh":
		return gitssh.NewClient(nil)
	default:
		return localTransport{}
	}
}

// newHTTPTransport follows redirects for ref discovery only (go-git's
// "initial" policy, which also strips credentials when a redirect leaves the
// origin) and, when the Source has credentials, refuses any redirect to
// another host:port at all.
func newHTTPTransport(withCreds bool, byteLimit int64) transport.Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: &limitedTransport{base: base, limit: byteLimit}}
	if withCreds {
		client.CheckRedirect = refuseCrossHostRedirect
	}
	return githttp.NewClientWithOptions(client, &githttp.ClientOptions{
		RedirectPolicy: githttp.FollowInitialRedirects,
	})
}

func refuseCrossHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 || sameHostPort(via[0], req) {
		return nil
	}
	return fmt.Errorf("refusing redirect with credentials to another host %q", req.URL.Host)
}

func sameHostPort(a, b *http.Request) bool {
	return strings.EqualFold(a.URL.Hostname(), b.URL.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(r *http.Request) string {
	if p := r.URL.Port(); p != "" {
		return p
	}
	if r.URL.Scheme == "http" {
		return "80"
	}
	return "443"
}

// limitedTransport bounds response bodies: a successful body may not exceed
// limit (ErrTooLarge), an error body is cut at maxErrorBody.
type limitedTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 300 {
		res.Body = truncatedBody{Reader: io.LimitReader(res.Body, maxErrorBody), Closer: res.Body}
		return res, nil
	}
	res.Body = &cappedReadCloser{cappedReader: cappedReader{r: res.Body, left: t.limit}, c: res.Body}
	return res, nil
}

type truncatedBody struct {
	io.Reader
	io.Closer
}

// cappedReader fails with ErrTooLarge once more than left bytes were read.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("%w: response exceeds the byte limit", ErrTooLarge)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, fmt.Errorf("%w: response exceeds the byte limit", ErrTooLarge)
	}
	return n, err
}

type cappedReadCloser struct {
	cappedReader
	c io.Closer
}

func (c *cappedReadCloser) Close() error { return c.c.Close() }

// sessionEndpoint returns a private copy of the endpoint for one session (the
// HTTP transport rewrites it on redirects) and, for ssh, routes the dial
// through a connection bound to ctx. release must be called after the session.
func sessionEndpoint(ctx context.Context, r *remote, byteLimit int64) (*transport.Endpoint, func()) {
	ep := *r.endpoint
	if ep.Protocol != "ssh" {
		return &ep, func() {}
	}
	return withBoundDial(ctx, &ep, byteLimit)
}

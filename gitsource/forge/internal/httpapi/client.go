package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cairn.dev/cairn/gitsource/forge"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root every path is appended to. http or https, no
	// credentials, no query.
	BaseURL string
	// HTTPClient sends the requests; nil means one with a 30 s timeout. The
	// client is copied: its redirect policy is replaced by one that never
	// leaves the base URL's origin (so the token is never offered elsewhere).
	HTTPClient *http.Client
	// Header is sent with every request; it holds the authentication header.
	Header http.Header
	// Secrets are scrubbed from every error (the token).
	Secrets []string
	// MaxResponseBytes caps a response body; zero means 32 MiB.
	MaxResponseBytes int64
}

// Client sends JSON requests to one forge API.
type Client struct {
	base     *url.URL
	http     *http.Client
	header   http.Header
	secrets  []string
	maxBytes int64
}

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	base, err := parseBase(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = sameOrigin(base)
	c := &Client{base: base, http: hc, header: cfg.Header.Clone(), secrets: cfg.Secrets, maxBytes: cfg.MaxResponseBytes}
	if c.maxBytes <= 0 {
		c.maxBytes = 32 << 20
	}
	return c, nil
}

func parseBase(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: base URL is not a URL", forge.ErrInvalid)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: base URL %q must be http or https", forge.ErrInvalid, u.Redacted())
	case u.User != nil:
		return nil, fmt.Errorf("%w: base URL must not hold credentials (pass the token instead)", forge.ErrInvalid)
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%w: base URL %q must have a host and no query", forge.ErrInvalid, u.Redacted())
	}
	return u, nil
}

// sameOrigin refuses redirects that leave the API's scheme, host and port.
func sameOrigin(base *url.URL) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		if req.URL.Scheme != base.Scheme || req.URL.Host != base.Host {
			return fmt.Errorf("refused a redirect to another origin (%s://%s)", req.URL.Scheme, req.URL.Host)
		}
		return nil
	}
}

// Request is one API call.
type Request struct {
	// Op says what the call is for, for errors: "set status ... on o/r@sha".
	Op     string
	Method string
	// Path segments below the base URL; each is escaped on its own, so a
	// segment "group/project" becomes "group%2Fproject".
	Path  []string
	Query url.Values
	// In is encoded as the JSON body when non-nil.
	In any
	// Out receives the decoded JSON answer when non-nil.
	Out any
}

// Do sends req and decodes a 2xx answer into req.Out. Any other answer is a
// *forge.APIError; transport failures are wrapped with the operation and URL.
// It returns the response headers (for pagination) on success.
func (c *Client) Do(ctx context.Context, req Request) (http.Header, error) {
	u := c.url(req.Path, req.Query)
	resp, err := c.send(ctx, req, u)
	if err != nil {
		return nil, c.transportError(req, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, c.transportError(req, u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, c.apiError(req, u, resp, body)
	}
	if int64(len(body)) > c.maxBytes {
		return nil, c.invalid(req, u, resp, fmt.Sprintf("response larger than %d bytes", c.maxBytes))
	}
	if req.Out != nil && len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, req.Out); err != nil {
			return nil, c.invalid(req, u, resp, "response is not the expected JSON: "+err.Error())
		}
	}
	return resp.Header, nil
}

func (c *Client) send(ctx context.Context, req Request, u *url.URL) (*http.Response, error) {
	var body io.Reader
	if req.In != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(req.In); err != nil {
			return nil, err
		}
		body = &buf
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range c.header {
		hr.Header[k] = v
	}
	hr.Header.Set("Accept", firstNonEmpty(c.header.Get("Accept"), "application/json"))
	if req.In != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	return c.http.Do(hr)
}

// url joins the escaped segments to the base URL.
func (c *Client) url(segments []string, query url.Values) *url.URL {
	u := *c.base
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	u.Path = c.base.Path + "/" + strings.Join(segments, "/")
	u.RawPath = c.base.EscapedPath() + "/" + strings.Join(escaped, "/")
	u.RawQuery = query.Encode()
	return &u
}

// display is the URL as errors show it: no query, no credentials.
func display(u *url.URL) string {
	d := *u
	d.RawQuery, d.User = "", nil
	return d.String()
}

func (c *Client) transportError(req Request, u *url.URL, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := fmt.Sprintf("failed to %s: %s %s: %s", req.Op, req.Method, display(u), err)
	return &scrubbed{msg: forge.Redact(msg, c.secrets...), err: err}
}

func (c *Client) invalid(req Request, u *url.URL, resp *http.Response, msg string) error {
	return &forge.APIError{Op: req.Op, Method: req.Method, URL: display(u), StatusCode: resp.StatusCode,
		Message: forge.Redact(msg, c.secrets...)}
}

func (c *Client) apiError(req Request, u *url.URL, resp *http.Response, body []byte) error {
	rateLimited, retryAfter := RateLimit(resp.StatusCode, resp.Header, time.Now())
	return &forge.APIError{
		Op: req.Op, Method: req.Method, URL: display(u), StatusCode: resp.StatusCode,
		Message:     forge.Redact(Message(body), c.secrets...),
		RateLimited: rateLimited, RetryAfter: retryAfter,
	}
}

// scrubbed is a transport error whose text was redacted; it still unwraps to
// the cause so that timeouts can be recognised.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

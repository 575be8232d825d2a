package sign

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"cairn.dev/cairn/internal/httpcap"
)

// Caps on what the package reads from a registry.
const (
	// MaxManifestBytes caps every manifest, including signature manifests.
	MaxManifestBytes = 4 << 20
	// MaxChartBytes caps a Helm chart archive.
	MaxChartBytes = 10 << 20
	// MaxArtifactBytes caps the sum of the files of an artifact.
	MaxArtifactBytes = 32 << 20
	// MaxArtifactFiles caps the number of files of an artifact.
	MaxArtifactFiles = 256
	// MaxSignatures caps the signature layers of a signature manifest.
	MaxSignatures = 50
	// MaxSignaturePayloadBytes caps one simple-signing payload.
	MaxSignaturePayloadBytes = 64 << 10
	// DefaultTimeout bounds each HTTP request when Endpoint.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// maxRedirects bounds the redirects of one request.
	maxRedirects = 10
)

// Endpoint is how to reach one registry.
type Endpoint struct {
	// Host is the registry's host[:port], e.g. registry.example.com:5000.
	Host string
	// PlainHTTP talks HTTP instead of HTTPS (local registries, tests).
	PlainHTTP bool
	// CAPEM is a PEM CA bundle trusted in addition to the system roots.
	CAPEM []byte
	// Timeout bounds each HTTP request (DefaultTimeout when zero).
	Timeout time.Duration
	// Credentials, when set, are sent to Host and only to Host.
	Credentials *Credentials
}

// Client talks to the repositories of one registry host.
type Client struct {
	host      string
	plainHTTP bool
	client    *auth.Client
}

// NewClient returns a Client for ep. Credentials are offered to ep.Host only: a
// redirect to another host:port (a blob store, say) is followed without them.
func NewClient(ep Endpoint) (*Client, error) {
	if ep.Host == "" {
		return nil, errors.New("registry host is empty")
	}
	httpClient, err := newHTTPClient(ep)
	if err != nil {
		return nil, err
	}
	ac := &auth.Client{Client: httpClient, Cache: auth.NewCache(), Header: http.Header{}}
	ac.SetUserAgent("cairn")
	if ep.Credentials != nil {
		ac.Credential = auth.StaticCredential(ep.Host, auth.Credential{
			Username: ep.Credentials.Username, Password: ep.Credentials.Password,
		})
	}
	return &Client{host: ep.Host, plainHTTP: ep.PlainHTTP, client: ac}, nil
}

// Host returns the registry host[:port] of the client.
func (c *Client) Host() string { return c.host }

// repository returns the oras repository host/repo.
func (c *Client) repository(repo string) (*remote.Repository, error) {
	r, err := remote.NewRepository(c.host + "/" + repo)
	if err != nil {
		return nil, newError(ReasonInvalidArtifact, "parse repository", c.host+"/"+repo, err)
	}
	r.Client = c.client
	r.PlainHTTP = c.plainHTTP
	r.MaxMetadataBytes = MaxManifestBytes
	r.SkipReferrersGC = true
	return r, nil
}

// ref names repo at reference (a tag, or a digest with "@").
func (c *Client) ref(repo, reference string) string {
	if strings.Contains(reference, ":") { // a tag has no colon, a digest has one
		return c.host + "/" + repo + "@" + reference
	}
	return c.host + "/" + repo + ":" + reference
}

func newHTTPClient(ep Endpoint) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ep.CAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ep.CAPEM) {
			return nil, fmt.Errorf("failed to parse the CA bundle of %s: no PEM certificate found", ep.Host)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	timeout := ep.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{
		Transport:     httpcap.Transport{Next: transport, Limit: MaxArtifactBytes + MaxManifestBytes},
		Timeout:       timeout,
		CheckRedirect: stripAuthOnRedirect,
	}, nil
}

// stripAuthOnRedirect follows at most maxRedirects redirects and drops the
// Authorization header (and cookies) when a redirect leaves the original host:port.
// net/http itself keeps them for another port of the same host name.
func stripAuthOnRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		req.Header.Del("Authorization")
		req.Header.Del("Cookie")
	}
	return nil
}

// errTooLarge marks content over a cap.
var errTooLarge = httpcap.ErrTooLarge

package sign

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v3/pkg/chart"
)

// testRegistry is an in-process registry behind httptest, counting requests.
type testRegistry struct {
	srv      *httptest.Server
	handler  http.Handler
	requests atomic.Int64
	mu       sync.Mutex
	paths    []string
}

// newTestRegistry starts a registry; wrap, when set, decorates its handler.
func newTestRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	reg := &testRegistry{handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.requests.Add(1)
		reg.mu.Lock()
		reg.paths = append(reg.paths, r.Method+" "+r.URL.Path)
		reg.mu.Unlock()
		reg.handler.ServeHTTP(w, r)
	})
	if wrap != nil {
		h = wrap(h)
	}
	reg.srv = httptest.NewServer(h)
	t.Cleanup(reg.srv.Close)
	return reg
}

func (r *testRegistry) host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

func (r *testRegistry) client(t *testing.T, creds *Credentials) *Client {
	t.Helper()
	c, err := NewClient(Endpoint{Host: r.host(), PlainHTTP: true, Credentials: creds, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// basicAuth requires user/pass on every request.
func basicAuth(user, pass string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// chartArchive packages a small chart with the Helm SDK and returns the .tgz.
func chartArchive(t *testing.T, name, version string) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version, Description: "test chart"},
		Templates: []*chart.File{{Name: "templates/configmap.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")}},
	}
	tgz, err := PackageChart(ch)
	if err != nil {
		t.Fatal(err)
	}
	return tgz
}

// testKeys are generated once per test binary: cosign encrypts private keys with
// scrypt, which is slow on purpose.
var (
	testKeysMu sync.Mutex
	testKeys   = map[int][2]any{}
)

// testKey returns the i-th test key pair (distinct i, distinct keys).
func testKey(t *testing.T, i int) (*PrivateKey, *PublicKey) {
	t.Helper()
	testKeysMu.Lock()
	defer testKeysMu.Unlock()
	if kp, ok := testKeys[i]; ok {
		return kp[0].(*PrivateKey), kp[1].(*PublicKey)
	}
	priv, pub, err := GenerateKeyPair([]byte("test-password"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := LoadPrivateKey(priv, []byte("test-password"))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	testKeys[i] = [2]any{key, pk}
	return key, pk
}

// pushFiles pushes a one-file artifact and returns its digest.
func pushFiles(t *testing.T, c *Client, repo, tag, content string) ocispec.Descriptor {
	t.Helper()
	desc, _, err := c.PushArtifact(context.Background(), repo, tag, "application/vnd.cairn.test.v1",
		[]File{{Name: "objects.yaml", MediaType: "application/yaml", Data: []byte(content)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

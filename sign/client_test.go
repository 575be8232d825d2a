package sign

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestUnauthorized(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, basicAuth("robot", secretPassword))

	_, err := reg.client(t, nil).Resolve(ctx, "charts/podinfo", "1.0.0")
	g.Expect(Reason(err)).To(Equal(ReasonUnauthorized), "%v", err)
	g.Expect(Transient(err)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring(reg.host() + "/charts/podinfo:1.0.0"))

	wrong := &Credentials{Username: "robot", Password: secretPassword + "-wrong"}
	_, _, err = reg.client(t, wrong).PushChart(ctx, "charts/podinfo", chartArchive(t, "podinfo", "1.0.0"))
	g.Expect(Reason(err)).To(Equal(ReasonUnauthorized), "%v", err)
	g.Expect(err.Error()).NotTo(ContainSubstring(secretPassword))

	right := reg.client(t, &Credentials{Username: "robot", Password: secretPassword})
	desc, _, err := right.PushChart(ctx, "charts/podinfo", chartArchive(t, "podinfo", "1.0.0"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = right.PullChart(ctx, "charts/podinfo", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	pushFiles(t, c, "rendered/x", "v1", "a")

	_, err := c.Resolve(ctx, "rendered/x", "v2")
	g.Expect(Reason(err)).To(Equal(ReasonNotFound))
	g.Expect(Transient(err)).To(BeFalse())

	missing := digest.FromString("missing")
	_, err = c.FetchManifest(ctx, "rendered/x", missing)
	g.Expect(Reason(err)).To(Equal(ReasonNotFound))
	g.Expect(err.Error()).To(ContainSubstring(c.Host() + "/rendered/x@" + missing.String()))

	_, err = c.PullChart(ctx, "no/such-repo", missing)
	g.Expect(Reason(err)).To(Equal(ReasonNotFound))
}

func TestServerErrorIsTransient(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer srv.Close()
	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.FetchManifest(context.Background(), "charts/podinfo", digest.FromString("x"))
	g.Expect(Reason(err)).To(Equal(ReasonFetchFailed))
	g.Expect(Transient(err)).To(BeTrue())

	srv.Close()
	_, err = c.Resolve(context.Background(), "charts/podinfo", "1.0.0")
	g.Expect(Reason(err)).To(Equal(ReasonFetchFailed))
	g.Expect(Transient(err)).To(BeTrue(), "connection refused")
}

func TestTimeoutIsTransient(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true, Timeout: 200 * time.Millisecond})
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	_, err = c.Resolve(context.Background(), "charts/podinfo", "1.0.0")
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	g.Expect(Reason(err)).To(Equal(ReasonFetchFailed))
	g.Expect(Transient(err)).To(BeTrue())
}

// lyingRegistry serves the manifests of reg, except that GET of manifest want
// returns other bytes; withHeader decides whether it still claims want in
// Docker-Content-Digest.
func lyingRegistry(reg *testRegistry, want digest.Digest, withHeader bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/manifests/"+want.String()) {
			reg.srv.Config.Handler.ServeHTTP(w, r)
			return
		}
		body := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`)
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		if withHeader {
			w.Header().Set("Docker-Content-Digest", want.String())
		}
		_, _ = w.Write(body)
	})
}

func TestDigestMismatch(t *testing.T) {
	reg := newTestRegistry(t, nil)
	desc := pushFiles(t, reg.client(t, nil), "rendered/x", "v1", "real content")
	for _, withHeader := range []bool{true, false} {
		g := NewWithT(t)
		liar := httptest.NewServer(lyingRegistry(reg, desc.Digest, withHeader))
		c, err := NewClient(Endpoint{Host: strings.TrimPrefix(liar.URL, "http://"), PlainHTTP: true})
		g.Expect(err).NotTo(HaveOccurred())

		_, err = c.FetchManifest(context.Background(), "rendered/x", desc.Digest)
		g.Expect(Reason(err)).To(Equal(ReasonDigestMismatch), "header %v: %v", withHeader, err)
		_, _, err = c.PullArtifact(context.Background(), "rendered/x", desc.Digest)
		g.Expect(Reason(err)).To(Equal(ReasonDigestMismatch))
		g.Expect(Transient(err)).To(BeFalse())
		liar.Close()
	}
}

func TestManifestOverTheCap(t *testing.T) {
	g := NewWithT(t)
	big := make([]byte, MaxManifestBytes+10)
	dgst := digest.FromBytes(big)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", dgst.String())
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = w.Write(big)
	}))
	defer srv.Close()
	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.FetchManifest(context.Background(), "x/y", dgst)
	g.Expect(Reason(err)).To(Equal(ReasonTooLarge), "%v", err)
}

func TestFetchManifestRejectsIndexes(t *testing.T) {
	g := NewWithT(t)
	body := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	dgst := digest.FromBytes(body)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.FetchManifest(context.Background(), "x/y", dgst)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidArtifact))
	g.Expect(err.Error()).To(ContainSubstring("not an OCI or Docker image manifest"))
}

// TestCredentialsStayOnTheirHost: the registry redirects blob downloads to a
// second server (another port of the same IP, which net/http alone would send
// the Authorization header to); that server must see no credentials.
func TestCredentialsStayOnTheirHost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var (
		mu            sync.Mutex
		storeAuth     []string
		registryAuths int
	)
	reg := newTestRegistry(t, nil)
	blobStore := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		storeAuth = append(storeAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		reg.handler.ServeHTTP(w, r)
	}))
	defer blobStore.Close()
	front := httptest.NewServer(basicAuth("robot", secretPassword)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		registryAuths++
		mu.Unlock()
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, blobStore.URL+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		reg.handler.ServeHTTP(w, r)
	})))
	defer front.Close()

	c, err := NewClient(Endpoint{Host: strings.TrimPrefix(front.URL, "http://"), PlainHTTP: true,
		Credentials: &Credentials{Username: "robot", Password: secretPassword}})
	g.Expect(err).NotTo(HaveOccurred())
	tgz := chartArchive(t, "podinfo", "1.0.0")
	desc, _, err := c.PushChart(ctx, "charts/podinfo", tgz)
	g.Expect(err).NotTo(HaveOccurred())
	pulled, err := c.PullChart(ctx, "charts/podinfo", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled).To(Equal(tgz))

	mu.Lock()
	defer mu.Unlock()
	g.Expect(registryAuths).To(BeNumerically(">", 0))
	g.Expect(storeAuth).NotTo(BeEmpty(), "the blob was fetched through the redirect")
	for _, h := range storeAuth {
		g.Expect(h).To(BeEmpty())
	}
}

func TestCustomCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	plain := newTestRegistry(t, nil)
	srv := httptest.NewUnstartedServer(plain.handler)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted client's handshake fails on purpose
	srv.StartTLS()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	trusted, err := NewClient(Endpoint{Host: host, CAPEM: caPEM})
	g.Expect(err).NotTo(HaveOccurred())
	desc := pushFiles(t, trusted, "rendered/x", "v1", "over TLS")
	files, _, err := trusted.PullArtifact(ctx, "rendered/x", desc.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(files[0].Data)).To(Equal("over TLS"))

	untrusted, err := NewClient(Endpoint{Host: host})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = untrusted.Resolve(ctx, "rendered/x", "v1")
	g.Expect(Reason(err)).To(Equal(ReasonFetchFailed))
	g.Expect(err.Error()).To(ContainSubstring("certificate"))

	_, err = NewClient(Endpoint{Host: host, CAPEM: []byte("not pem")})
	g.Expect(err).To(MatchError(ContainSubstring("no PEM certificate")))
}

func TestPullArtifactRejectsUnsafeNames(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	r, err := c.repository("rendered/x")
	g.Expect(err).NotTo(HaveOccurred())
	layer := newBlob("application/yaml", []byte("x"))
	layer.desc.Annotations = map[string]string{ocispec.AnnotationTitle: "../../etc/cron.d/x"}
	config := blob{desc: ocispec.DescriptorEmptyJSON, data: ocispec.DescriptorEmptyJSON.Data}
	manifest, err := marshalManifest(ocispec.Manifest{Versioned: specsV2, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: testArtifactType, Config: config.desc, Layers: []ocispec.Descriptor{layer.desc}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.pushManifest(ctx, r, "rendered/x", []blob{config, layer}, manifest, "evil")).To(Succeed())

	_, _, err = c.PullArtifact(ctx, "rendered/x", manifest.desc.Digest)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidArtifact))
	g.Expect(err.Error()).To(ContainSubstring("not a clean relative path"))
}

var specsV2 = specs.Versioned{SchemaVersion: 2}

package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"cuelabs.dev/go/oci/ociregistry/ocimem"
	"cuelabs.dev/go/oci/ociregistry/ociserver"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
)

// fakeVerifier resolves tags through a real registry client and answers with
// a fixed verdict per repository, recording what it was asked.
type fakeVerifier struct {
	mu      sync.Mutex
	asked   []string
	refuse  map[string]error  // repo -> refusal
	pin     map[string]string // repo:tag -> digest to return instead of resolving
	resolve func(ctx context.Context, repo, tag string) (string, error)
}

func (f *fakeVerifier) ResolveVerified(ctx context.Context, host, repo, tag string) (string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, repo+":"+tag)
	err, pinned := f.refuse[repo], f.pin[repo+":"+tag]
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	if pinned != "" {
		return pinned, nil
	}
	return f.resolve(ctx, repo, tag)
}

func resolverFor(t *testing.T, reg ModuleRegistry) func(ctx context.Context, repo, tag string) (string, error) {
	plain := reg
	plain.Verifier = nil
	r := &resolver{reg: plain}
	return func(ctx context.Context, repo, tag string) (string, error) {
		loc, err := r.ResolveToRegistry("x", "v0.0.0")
		if err != nil {
			return "", err
		}
		desc, err := loc.Registry.ResolveTag(ctx, repo, tag)
		if err != nil {
			return "", err
		}
		return string(desc.Digest), nil
	}
}

// TestVerifierSeesEveryModuleAndCanRefuse renders a registry module whose
// catalog dependency comes from the same registry: the verifier is asked for
// both, a refusal fails the render with VerifyFailed and the verifier's own
// error, and a module cached under no policy is not reused under one.
func TestVerifierSeesEveryModuleAndCanRefuse(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t)
	push(t, reg, "../examples/registry/catalog", "v0.1.0")
	push(t, reg, "../examples/registry/redis", "v0.1.0")
	cache := t.TempDir()
	req := Request{
		Name: "cache", Namespace: "team-a",
		CUEModule: &CUEModuleRef{Path: "cairn.dev/examples/redis@v0", Version: "v0.1.0"},
		Catalogs:  []Catalog{{Module: "cairn.dev/examples/catalog@v0", Version: "v0.1.0"}},
		CacheDir:  cache,
	}
	// Fetched once without a policy: now on disk.
	plain := reg
	req.Registry = &plain
	_, err := NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())

	v := &fakeVerifier{refuse: map[string]error{}, resolve: resolverFor(t, reg)}
	verified := reg
	verified.Verifier, verified.VerifyID = v, "Enforce/key-a"
	req.Registry = &verified
	_, err = NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	asked := map[string]bool{}
	for _, a := range v.asked {
		asked[a] = true
	}
	g.Expect(asked).To(Equal(map[string]bool{
		"cairn-modules/cairn.dev/examples/redis:v0.1.0":   true,
		"cairn-modules/cairn.dev/examples/catalog:v0.1.0": true,
	}))

	// A refusal under another policy (another cache partition) fails the render.
	refusal := errors.New("no signature for that digest")
	v2 := &fakeVerifier{refuse: map[string]error{"cairn-modules/cairn.dev/examples/catalog": refusal}, resolve: resolverFor(t, reg)}
	refused := reg
	refused.Verifier, refused.VerifyID = v2, "Enforce/key-b"
	req.Registry = &refused
	_, err = NewRenderer().Render(context.Background(), req)
	g.Expect(err).To(HaveOccurred())
	g.Expect(Reason(err)).To(Equal(ReasonVerifyFailed))
	g.Expect(errors.Is(err, refusal)).To(BeTrue(), "the verifier's error is kept: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("cairn.dev/examples/catalog@v0.1.0"))
}

// TestVerifiedDigestIsWhatIsPulled moves the tag after it was resolved: the
// module pulled is the one at the verified digest, not the new tag target.
func TestVerifiedDigestIsWhatIsPulled(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t)
	first := push(t, reg, "testdata/registry/lib", "v0.1.0")
	// Publish other content of the same module under the same tag (the registry
	// allows it): the tag now names the second manifest.
	second := push(t, reg, changedModuleCopy(t, "testdata/registry/lib"), "v0.1.0")
	g.Expect(second).NotTo(Equal(first))
	now, err := resolverFor(t, reg)(context.Background(), "cairn-modules/example.com/lib", "v0.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now).To(Equal(second), "the tag moved")

	// The verifier resolved (and verified) the tag while it named the first manifest.
	v := &fakeVerifier{pin: map[string]string{"cairn-modules/example.com/lib:v0.1.0": first}, resolve: resolverFor(t, reg)}
	pinned := reg
	pinned.Verifier, pinned.VerifyID = v, "pin"
	loc, err := (&resolver{reg: pinned}).ResolveToRegistry("example.com/lib", "v0.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	rd, err := loc.Registry.GetTag(context.Background(), loc.Repository, loc.Tag)
	g.Expect(err).NotTo(HaveOccurred())
	defer rd.Close()
	g.Expect(string(rd.Descriptor().Digest)).To(Equal(first))
	body, err := io.ReadAll(rd)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digest.FromBytes(body).String()).To(Equal(first), "the manifest read is the verified one")
}

// changedModuleCopy copies a module directory with a comment added to its .cue
// files, so that it publishes as other content under the same module path.
func changedModuleCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		target := filepath.Join(out, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".cue") && !strings.Contains(rel, "cue.mod") {
			data = append(data, "\n// changed\n"...)
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRegistryCredentialsStayOnTheirHost serves modules behind basic auth:
// without credentials the fetch fails, with them it works, and the
// credentials never show in errors or in the registry's printed forms.
func TestRegistryCredentialsStayOnTheirHost(t *testing.T) {
	g := NewWithT(t)
	const user, pass = "cairn", "s3cret-Pa55word"
	inner := ociserver.New(ocimem.New(), nil)
	var mu sync.Mutex
	authorized := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		authorized++
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	withCreds := ModuleRegistry{Host: host, PlainHTTP: true, Prefix: "m", Username: user, Password: pass}
	push(t, withCreds, "../examples/registry/catalog", "v0.1.0")
	push(t, withCreds, "../examples/registry/redis", "v0.1.0")

	req := Request{
		Name: "cache", Namespace: "team-a",
		CUEModule: &CUEModuleRef{Path: "cairn.dev/examples/redis@v0", Version: "v0.1.0"},
		Catalogs:  []Catalog{{Module: "cairn.dev/examples/catalog@v0", Version: "v0.1.0"}},
		CacheDir:  t.TempDir(),
	}
	anonymous := withCreds
	anonymous.Username, anonymous.Password = "", ""
	req.Registry = &anonymous
	_, err := NewRenderer().Render(context.Background(), req)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(MatchRegexp(`(?i)401|unauthori`))

	wrong := withCreds
	wrong.Password = "not-" + pass
	req.Registry, req.CacheDir = &wrong, t.TempDir()
	_, err = NewRenderer().Render(context.Background(), req)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring(pass))

	req.Registry, req.CacheDir = &withCreds, t.TempDir()
	_, err = NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(authorized).To(BeNumerically(">", 0))

	for _, s := range []string{fmt.Sprint(withCreds), fmt.Sprintf("%v %+v %#v %s", withCreds, withCreds, withCreds, withCreds)} {
		g.Expect(s).NotTo(ContainSubstring(pass))
	}
	// Credentials are for the registry's own host only.
	g.Expect(hostCredentials{reg: withCreds}.EntryForRegistry("evil.example.com:443")).To(BeZero())
	u, _ := url.Parse(srv.URL)
	g.Expect(hostCredentials{reg: withCreds}.EntryForRegistry(u.Host)).NotTo(BeZero())
}

// TestVerifyPolicyWithoutVerifierFailsClosed asks for verification and gives
// no verifier: every module is refused.
func TestVerifyPolicyWithoutVerifierFailsClosed(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t)
	push(t, reg, "../examples/registry/catalog", "v0.1.0")
	reg.VerifyID = "Enforce/some-key"
	req := registryRequest(reg, "cairn.dev/examples/catalog@v0", t.TempDir())
	_, err := NewRenderer().Render(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonVerifyFailed))
	g.Expect(err.Error()).To(ContainSubstring("no verifier"))
}

package render

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"cuelabs.dev/go/oci/ociregistry"
	"cuelabs.dev/go/oci/ociregistry/ociauth"
	"cuelabs.dev/go/oci/ociregistry/ociclient"
	"cuelang.org/go/mod/modcache"
	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/modregistry"
	"cuelang.org/go/mod/module"

	"cairn.dev/cairn/internal/httpcap"
)

// Caps on what one render takes from the registry.
const (
	maxResponseBytes = 64 << 20
	maxDependencies  = 100
)

type cacheKey struct {
	reg ModuleRegistry
	dir string
}

// moduleCache is CUE's on-disk module cache (content checked by CUE's zip
// rules) in front of one registry.
type moduleCache struct {
	dir   string
	cache *modcache.Cache
}

// cacheFor returns the cache for the request's registry and cache directory.
// The registry is configured only from the request: never from CUE_REGISTRY,
// the CUE login file or a docker config.
func (r *Renderer) cacheFor(req Request, needed string) (*moduleCache, error) {
	if req.Registry == nil || req.Registry.Host == "" {
		return nil, newError(ReasonModuleNotFound, "%s needs a module registry, and none is configured", needed)
	}
	dir, err := r.cacheDir(req.CacheDir)
	if err != nil {
		return nil, err
	}
	if id := req.Registry.VerifyID; id != "" {
		// Modules fetched under a verification policy are kept apart, so
		// that nothing cached without that check is used under it.
		dir = filepath.Join(dir, "verified-"+shortHash(id))
	}
	reg := *req.Registry
	reg.Verifier = nil // taken from each render's context
	key := cacheKey{reg: reg, dir: dir}
	r.mu.Lock()
	defer r.mu.Unlock()
	if mc, ok := r.caches[key]; ok {
		return mc, nil
	}
	cache, err := modcache.New(newRegistryClient(reg), dir)
	if err != nil {
		return nil, newError(ReasonFetchFailed, "failed to open the module cache: %w", err)
	}
	mc := &moduleCache{dir: dir, cache: cache}
	r.caches[key] = mc
	return mc, nil
}

func (r *Renderer) cacheDir(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tempDir == "" {
		d, err := os.MkdirTemp("", "cairn-render-cache-")
		if err != nil {
			return "", newError(ReasonFetchFailed, "failed to create a module cache directory: %w", err)
		}
		r.tempDir = d
	}
	return r.tempDir, nil
}

// newRegistryClient returns a CUE module registry client for reg: credentials
// for reg.Host only and in memory, plain HTTP only when asked, reg's CAs,
// responses capped in size, and every tag resolved and verified through
// reg.Verifier when it is set.
func newRegistryClient(reg ModuleRegistry) *modregistry.Client {
	return modregistry.NewClientWithResolver(&resolver{reg: reg})
}

// resolver maps every module to the one registry, at
// "<prefix>/<module path without major version>:<version>", as CUE does for
// CUE_REGISTRY=host/prefix.
type resolver struct {
	reg  ModuleRegistry
	once sync.Once
	oci  ociregistry.Interface
	err  error
}

// ResolveToRegistry implements modregistry.Resolver.
func (r *resolver) ResolveToRegistry(mpath, version string) (modregistry.RegistryLocation, error) {
	r.once.Do(func() {
		var base http.RoundTripper
		if base, r.err = registryTransport(r.reg); r.err != nil {
			return
		}
		r.oci, r.err = ociclient.New(r.reg.Host, &ociclient.Options{
			Insecure: r.reg.PlainHTTP,
			Transport: ociauth.NewStdTransport(ociauth.StdTransportParams{
				Config:    hostCredentials{reg: r.reg},
				Transport: httpcap.Transport{Next: base, Limit: maxResponseBytes},
			}),
		})
		if r.err == nil && (r.reg.Verifier != nil || r.reg.VerifyID != "") {
			r.oci = &verifiedRegistry{Interface: r.oci, host: r.reg.Host, verifier: r.reg.Verifier, policy: r.reg.VerifyID}
		}
	})
	if r.err != nil {
		return modregistry.RegistryLocation{}, r.err
	}
	return modregistry.RegistryLocation{Registry: r.oci, Repository: ModuleRepository(r.reg, mpath), Tag: version}, nil
}

func registryTransport(reg ModuleRegistry) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.ResponseHeaderTimeout = 30 * time.Second
	if reg.Timeout > 0 {
		t.ResponseHeaderTimeout = reg.Timeout
	}
	if reg.CAPEM != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(reg.CAPEM)) {
			return nil, newError(ReasonFetchFailed, "the CA bundle of registry %s holds no PEM certificate", reg.Host)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t, nil
}

// hostCredentials gives reg's credentials to reg.Host and to no other host.
type hostCredentials struct{ reg ModuleRegistry }

// EntryForRegistry implements ociauth.Config.
func (h hostCredentials) EntryForRegistry(host string) (ociauth.ConfigEntry, error) {
	if host != h.reg.Host || h.reg.Username == "" {
		return ociauth.ConfigEntry{}, nil
	}
	return ociauth.ConfigEntry{Username: h.reg.Username, Password: h.reg.Password}, nil
}

// verifiedRegistry resolves every tag through the verifier and reads the
// manifest by the digest it returns, so that what is used is what was
// verified even if the tag moves meanwhile. The verifier is the one in the
// render's context (else the one it was built with); with neither, every
// module is refused: a policy that asks for verification fails closed.
type verifiedRegistry struct {
	ociregistry.Interface
	host     string
	verifier ModuleVerifier
	policy   string
}

type verifierKey struct{}

func (v *verifiedRegistry) resolve(ctx context.Context, repo, tag string) (ociregistry.Digest, error) {
	verifier, _ := ctx.Value(verifierKey{}).(ModuleVerifier)
	if verifier == nil {
		verifier = v.verifier
	}
	if verifier == nil {
		return "", &verifyError{err: fmt.Errorf("%s/%s:%s must be verified (policy %s), and no verifier was given", v.host, repo, tag, v.policy)}
	}
	dgst, err := verifier.ResolveVerified(ctx, v.host, repo, tag)
	if err != nil {
		return "", &verifyError{err: err}
	}
	return ociregistry.Digest(dgst), nil
}

// GetTag implements ociregistry.Interface.
func (v *verifiedRegistry) GetTag(ctx context.Context, repo, tag string) (ociregistry.BlobReader, error) {
	dgst, err := v.resolve(ctx, repo, tag)
	if err != nil {
		return nil, err
	}
	return v.Interface.GetManifest(ctx, repo, dgst)
}

// ResolveTag implements ociregistry.Interface.
func (v *verifiedRegistry) ResolveTag(ctx context.Context, repo, tag string) (ociregistry.Descriptor, error) {
	dgst, err := v.resolve(ctx, repo, tag)
	if err != nil {
		return ociregistry.Descriptor{}, err
	}
	return v.Interface.ResolveManifest(ctx, repo, dgst)
}

// verifyError marks a module refused by its verifier.
type verifyError struct{ err error }

func (e *verifyError) Error() string { return e.err.Error() }
func (e *verifyError) Unwrap() error { return e.err }

// registrySource fetches the requested module into the cache and reads it.
func (r *Renderer) registrySource(ctx context.Context, req Request) (*moduleSource, error) {
	mv, err := moduleVersion(req.CUEModule.Path, req.CUEModule.Version)
	if err != nil {
		return nil, err
	}
	mc, err := r.cacheFor(req, "module "+mv.String())
	if err != nil {
		return nil, err
	}
	files, digest, err := mc.fetch(ctx, mv)
	if err != nil {
		return nil, err
	}
	src := &moduleSource{name: mv.String(), display: mv.String() + "/", files: files, digest: digest}
	if src.modFile, err = parseModFile(files[modFilePath], src.display+modFilePath); err != nil {
		return nil, err
	}
	if src.modFile.QualifiedModule() != mv.Path() {
		return nil, newError(ReasonModuleNotFound, "registry module %s declares module %q", mv, src.modFile.QualifiedModule())
	}
	return src, src.check()
}

// moduleVersion parses a module reference; a path without a major version
// suffix gets the version's major.
func moduleVersion(mpath, version string) (module.Version, error) {
	mv, err := module.NewVersion(qualify(mpath, version), version)
	if err != nil {
		return module.Version{}, newError(ReasonModuleNotFound, "invalid module reference %s %s: %w", mpath, version, err)
	}
	return mv, nil
}

// fetch downloads a module version (if not cached) and returns its files and
// the digest of its zip.
func (mc *moduleCache) fetch(ctx context.Context, mv module.Version) (map[string][]byte, string, error) {
	loc, err := mc.cache.Fetch(ctx, mv)
	if err != nil {
		return nil, "", mc.fetchError(mv, err)
	}
	files, err := readModuleFiles(loc.FS, loc.Dir, mv.String()+"/")
	if err != nil {
		return nil, "", err
	}
	digest, err := mc.zipDigest(mv)
	if err != nil {
		digest = filesDigest(files)
	}
	return files, digest, nil
}

// modFile returns the module file of a module version.
func (mc *moduleCache) modFile(ctx context.Context, mv module.Version) (*modfile.File, error) {
	mf, err := mc.cache.ModFile(ctx, mv)
	if err != nil {
		return nil, mc.fetchError(mv, err)
	}
	return mf, nil
}

// zipDigest hashes the module zip that CUE's cache keeps beside the extracted
// files (the blob the registry served).
func (mc *moduleCache) zipDigest(mv module.Version) (string, error) {
	esc, err := module.EscapePath(mv.BasePath())
	if err != nil {
		return "", err
	}
	ver, err := module.EscapeVersion(mv.Version())
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(mc.dir, "mod", "download", esc, "@v", ver+".zip"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// fetchError classifies a registry error and keeps cache paths out of it.
func (mc *moduleCache) fetchError(mv module.Version, err error) *Error {
	msg := strings.ReplaceAll(err.Error(), mc.dir, "<cache>")
	if ve := (*verifyError)(nil); errors.As(err, &ve) {
		return newError(ReasonVerifyFailed, "module %s: %w", mv, ve.err)
	}
	if errors.Is(err, modregistry.ErrNotFound) || errors.Is(err, ociregistry.ErrNameUnknown) || errors.Is(err, ociregistry.ErrManifestUnknown) {
		return newError(ReasonModuleNotFound, "module %s not found in the registry: %s", mv, msg)
	}
	return newError(ReasonFetchFailed, "failed to fetch module %s: %s", mv, msg)
}

// shortHash returns 16 hex digits of the SHA-256 of s.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

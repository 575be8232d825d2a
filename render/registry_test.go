package render

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testCatalogs publishes the test catalog at v0.1.0 and v0.2.0, the modules
// built on it, and returns the registry.
func testCatalogs(t *testing.T) ModuleRegistry {
	t.Helper()
	reg := newTestRegistry(t)
	push(t, reg, "testdata/registry/catalog-v1", "v0.1.0")
	push(t, reg, "testdata/registry/catalog-v2", "v0.2.0")
	push(t, reg, "testdata/registry/lib", "v0.1.0")
	for _, m := range []string{"app", "oldapp", "app2", "broken"} {
		push(t, reg, filepath.Join("testdata/registry", m), "v0.1.0")
	}
	return reg
}

func registryRequest(reg ModuleRegistry, module, cacheDir string) Request {
	return Request{
		Name: "web", Namespace: "team-a",
		CUEModule: &CUEModuleRef{Path: module, Version: "v0.1.0"},
		Registry:  &reg, CacheDir: cacheDir,
	}
}

// TestPushThenRenderRegistryModule publishes the example catalog and the
// redis module built on it, renders redis, and renders it again from the cache
// once the registry is gone.
func TestPushThenRenderRegistryModule(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t)
	catalogDigest := push(t, reg, "../examples/registry/catalog", "v0.1.0")
	redisDigest := push(t, reg, "../examples/registry/redis", "v0.1.0")
	g.Expect(catalogDigest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(redisDigest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(redisDigest).NotTo(Equal(catalogDigest))
	// Publishing the same content again gives the same manifest.
	g.Expect(push(t, reg, "../examples/registry/redis", "v0.1.0")).To(Equal(redisDigest))

	cache := t.TempDir()
	req := Request{
		Name: "cache", Namespace: "team-a",
		CUEModule: &CUEModuleRef{Path: "cairn.dev/examples/redis@v0", Version: "v0.1.0"},
		Values:    []byte(`{"maxMemory": "128mb"}`),
		Catalogs:  []Catalog{{Module: "cairn.dev/examples/catalog@v0", Version: "v0.1.0"}},
		Registry:  &reg, CacheDir: cache,
	}
	res, err := NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ModuleDigest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(res.Warnings).To(BeEmpty())
	expectGolden(t, "redis", res)

	// A new Renderer on the same cache needs no registry.
	offline := reg
	offline.Host = "127.0.0.1:1"
	req.Registry = &offline
	again, err := NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(res.Digest))
	g.Expect(again.ModuleDigest).To(Equal(res.ModuleDigest))
}

func TestCatalogPinning(t *testing.T) {
	reg := testCatalogs(t)
	tests := []struct {
		name     string
		module   string // registry module, or local test module when it has no "@"
		pinned   string
		policy   string
		reason   string
		message  string
		tier     string
		warnings []string
	}{
		{name: "newer requirement refused", module: "example.com/app@v0", pinned: "v0.1.0", policy: SkewRefuse,
			reason: ReasonCatalogSkew, message: "module example.com/app@v0.1.0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0"},
		{name: "newer requirement warned", module: "example.com/app@v0", pinned: "v0.1.0", policy: SkewWarn,
			tier: "catalog-v0.1.0", warnings: []string{"module example.com/app@v0.1.0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"}},
		{name: "default policy warns", module: "example.com/app@v0", pinned: "v0.1.0",
			tier: "catalog-v0.1.0", warnings: []string{"module example.com/app@v0.1.0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"}},
		{name: "older requirement gets the pinned version", module: "example.com/oldapp@v0", pinned: "v0.2.0", policy: SkewRefuse,
			tier: "catalog-v0.2.0"},
		{name: "same version", module: "example.com/app@v0", pinned: "v0.2.0", policy: SkewRefuse, tier: "catalog-v0.2.0"},
		{name: "no pin uses the listed version", module: "example.com/oldapp@v0", tier: "catalog-v0.1.0"},
		{name: "skew of a dependency refused", module: "example.com/app2@v0", pinned: "v0.1.0", policy: SkewRefuse,
			reason: ReasonCatalogSkew, message: "module example.com/lib@v0.1.0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0"},
		{name: "skew of a dependency warned", module: "example.com/app2@v0", pinned: "v0.1.0", policy: SkewWarn,
			tier: "catalog-v0.1.0", warnings: []string{"module example.com/lib@v0.1.0 requires catalog example.com/catalog@v0 v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"}},
		{name: "local module without module file gets the catalogs", module: "modules/usescatalog", pinned: "v0.2.0", tier: "catalog-v0.2.0"},
		{name: "pin without major version suffix", module: "modules/usescatalog", pinned: "v0.1.0", tier: "catalog-v0.1.0"},
	}
	r := NewRenderer()
	defer r.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			req := registryRequest(reg, tt.module, "")
			if filepath.Ext(tt.module) == "" && tt.module[0] == 'm' {
				req.CUEModule, req.Source, req.LocalPath = nil, testRepo, tt.module
			}
			if tt.pinned != "" {
				catalog := "example.com/catalog@v0"
				if tt.name == "pin without major version suffix" {
					catalog = "example.com/catalog"
				}
				req.Catalogs = []Catalog{{Module: catalog, Version: tt.pinned}}
			}
			req.SkewPolicy = tt.policy
			res, err := r.Render(context.Background(), req)
			if tt.reason != "" {
				g.Expect(Reason(err)).To(Equal(tt.reason), "error: %v", err)
				g.Expect(err.Error()).To(Equal(tt.message))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Objects).To(HaveLen(1))
			g.Expect(res.Objects[0].GetLabels()).To(HaveKeyWithValue("tier", tt.tier))
			g.Expect(res.Warnings).To(Equal(tt.warnings))
		})
	}
}

func TestRegistryErrors(t *testing.T) {
	reg := testCatalogs(t)
	r := NewRenderer()
	defer r.Close()

	t.Run("unknown module", func(t *testing.T) {
		g := NewWithT(t)
		_, err := r.Render(context.Background(), registryRequest(reg, "example.com/nope@v0", ""))
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound), "error: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("module example.com/nope@v0.1.0 not found"))
	})
	t.Run("unknown version", func(t *testing.T) {
		g := NewWithT(t)
		req := registryRequest(reg, "example.com/app@v0", "")
		req.CUEModule.Version = "v0.9.0"
		_, err := r.Render(context.Background(), req)
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound), "error: %v", err)
	})
	t.Run("unreachable registry", func(t *testing.T) {
		g := NewWithT(t)
		down := reg
		down.Host = "127.0.0.1:1"
		_, err := r.Render(context.Background(), registryRequest(down, "example.com/app@v0", t.TempDir()))
		g.Expect(Reason(err)).To(Equal(ReasonFetchFailed), "error: %v", err)
	})
	t.Run("error in a registry module", func(t *testing.T) {
		g := NewWithT(t)
		cache := t.TempDir()
		_, err := r.Render(context.Background(), registryRequest(reg, "example.com/broken@v0", cache))
		var e *Error
		g.Expect(err).To(BeAssignableToTypeOf(e))
		e = err.(*Error)
		g.Expect(e.Reason).To(Equal(ReasonRenderFailed))
		g.Expect(e.File).To(Equal("example.com/broken@v0.1.0/main.cue"))
		g.Expect(e.Line).To(Equal(9))
		g.Expect(err.Error()).To(ContainSubstring("conflicting values 2 and 1"))
		g.Expect(err.Error()).NotTo(ContainSubstring(cache))
	})
	t.Run("dependency missing from module.cue", func(t *testing.T) {
		g := NewWithT(t)
		req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/untidy", Registry: &reg,
			Catalogs: []Catalog{{Module: "example.com/catalog@v0", Version: "v0.1.0"}}}
		_, err := r.Render(context.Background(), req)
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound), "error: %v", err)
		g.Expect(err.Error()).To(HavePrefix("modules/untidy/main.cue:3:8: "))
	})
	t.Run("local module depending on a catalog without registry", func(t *testing.T) {
		g := NewWithT(t)
		req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/usescatalog",
			Catalogs: []Catalog{{Module: "example.com/catalog@v0", Version: "v0.1.0"}}}
		_, err := r.Render(context.Background(), req)
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound), "error: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("needs a module registry, and none is configured"))
	})
	t.Run("fetch under the deadline", func(t *testing.T) {
		g := NewWithT(t)
		req := registryRequest(reg, "example.com/app@v0", t.TempDir())
		req.Limits.Timeout = time.Nanosecond
		_, err := r.Render(context.Background(), req)
		g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout), "error: %v", err)
	})
}

func TestPushModuleErrors(t *testing.T) {
	reg := newTestRegistry(t)
	t.Run("not a module", func(t *testing.T) {
		g := NewWithT(t)
		_, err := PushModule(context.Background(), "testdata/repo/modules/nomodfile", reg, "v0.1.0")
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound))
	})
	t.Run("bad version", func(t *testing.T) {
		g := NewWithT(t)
		_, err := PushModule(context.Background(), "testdata/registry/catalog-v1", reg, "1.0")
		g.Expect(Reason(err)).To(Equal(ReasonModuleNotFound))
	})
	t.Run("symlink in the module", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		g.Expect(os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/x@v0\"\nlanguage: version: \"v0.17.0\"\n"), 0o644)).To(Succeed())
		g.Expect(os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.txt"))).To(Succeed())
		_, err := PushModule(context.Background(), dir, reg, "v0.1.0")
		g.Expect(Reason(err)).To(Equal(ReasonUnsafeModule))
		g.Expect(err.Error()).To(HavePrefix("passwd.txt: "))
	})
	t.Run("unreachable registry", func(t *testing.T) {
		g := NewWithT(t)
		_, err := PushModule(context.Background(), "testdata/registry/catalog-v1", ModuleRegistry{Host: "127.0.0.1:1", PlainHTTP: true}, "v0.1.0")
		g.Expect(Reason(err)).To(Equal(ReasonFetchFailed))
	})
}

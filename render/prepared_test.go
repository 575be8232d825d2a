package render

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	. "github.com/onsi/gomega"
)

const preparedModuleSource = `package app

#config: {replicas: *1 | int & >=0}
instance: {name: string, namespace: string}
values: #config
objects: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: instance.name
	data: replicas: "\(values.replicas)"
}
`

// renderOutcome is what a render returns, comparable between renders.
type renderOutcome struct {
	Digest, ModuleDigest string
	Objects              []map[string]any
	Warnings             []string
	Err                  string
	Reason               string
	File                 string
	Line, Column         int
}

func outcomeOf(res *Result, err error) renderOutcome {
	if err != nil {
		o := renderOutcome{Err: err.Error(), Reason: Reason(err)}
		if e, ok := err.(*Error); ok {
			o.File, o.Line, o.Column = e.File, e.Line, e.Column
		}
		return o
	}
	o := renderOutcome{Digest: res.Digest, ModuleDigest: res.ModuleDigest, Warnings: res.Warnings}
	for _, u := range res.Objects {
		o.Objects = append(o.Objects, u.Object)
	}
	return o
}

// cachedModules is the number of prepared modules r keeps.
func cachedModules(r *Renderer) int {
	n, _ := r.prepared.stats()
	return n
}

// alone renders req with a new Renderer: no prepared module, no used context.
func alone(t *testing.T, req Request) renderOutcome {
	t.Helper()
	r := newInProcessRenderer()
	defer r.Close()
	return outcomeOf(r.Render(context.Background(), req))
}

// TestPreparedModuleReused: the second render of a module uses the prepared
// module, with the same renderOutcome as a render without it; a change to the
// module's files, or the same files at another path, prepare it again.
func TestPreparedModuleReused(t *testing.T) {
	g := NewWithT(t)
	src := fstest.MapFS{
		"a/m/main.cue": {Data: []byte(preparedModuleSource)},
		"b/m/main.cue": {Data: []byte(preparedModuleSource)},
	}
	r := newInProcessRenderer()
	request := func(dir, values string) Request {
		return Request{Name: "web", Namespace: "team-a", Source: src, LocalPath: dir, Values: []byte(values)}
	}
	render := func(req Request) renderOutcome {
		o := outcomeOf(r.Render(context.Background(), req))
		g.Expect(o).To(Equal(alone(t, req)), "render of %s with %s", req.LocalPath, req.Values)
		return o
	}

	first := render(request("a/m", `{"replicas": 2}`))
	g.Expect(first.Err).To(BeEmpty())
	g.Expect(cachedModules(r)).To(Equal(1))
	second := render(request("a/m", `{"replicas": 3}`))
	g.Expect(second.Objects[0]["data"]).To(HaveKeyWithValue("replicas", "3"))
	g.Expect(second.ModuleDigest).To(Equal(first.ModuleDigest))
	g.Expect(cachedModules(r)).To(Equal(1), "the second render uses the prepared module")

	// Errors keep their positions in the prepared module's files.
	bad := render(request("a/m", `{"replicas": -1}`))
	g.Expect(bad.Reason).To(Equal(ReasonRenderFailed))
	g.Expect(bad.File).To(Equal("a/m/main.cue"))
	// The same files at another path are another module.
	bad = render(request("b/m", `{"replicas": -1}`))
	g.Expect(bad.File).To(Equal("b/m/main.cue"))
	g.Expect(cachedModules(r)).To(Equal(2))

	// A change to the files prepares the module again.
	src["a/m/main.cue"] = &fstest.MapFile{Data: []byte(preparedModuleSource + "objects: cm: data: changed: \"yes\"\n")}
	changed := render(request("a/m", `{"replicas": 3}`))
	g.Expect(changed.Objects[0]["data"]).To(HaveKeyWithValue("changed", "yes"))
	g.Expect(changed.ModuleDigest).NotTo(Equal(first.ModuleDigest))
	g.Expect(cachedModules(r)).To(Equal(3))
}

// TestPreparedModuleReadsOnlyTheModule: a render that uses a prepared module
// still reads the module (its files are its identity) and nothing else.
func TestPreparedModuleReadsOnlyTheModule(t *testing.T) {
	g := NewWithT(t)
	r := newInProcessRenderer()
	_, err := renderLocal(t, r, testRepo, "modules/basic", "")
	g.Expect(err).NotTo(HaveOccurred())
	rec := &recordingFS{FS: testRepo}
	_, err = renderLocal(t, r, rec, "modules/basic", `{"replicas": 2}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.paths).To(ContainElement("modules/basic/main.cue"))
	g.Expect(rec.outside("modules/basic")).To(BeEmpty())
}

// TestPreparedModuleCatalogs: the pinned catalogs and the skew policy are
// part of what a prepared module is prepared for, and its warnings are given
// again by every render that uses it.
func TestPreparedModuleCatalogs(t *testing.T) {
	reg := testCatalogs(t)
	cache := t.TempDir()
	r := newInProcessRenderer()
	defer r.Close()
	tests := []struct {
		module, pinned, policy string
		reason                 string
		warnings               int
	}{
		{module: "example.com/app@v0", pinned: "v0.1.0", policy: SkewWarn, warnings: 1},
		{module: "example.com/app@v0", pinned: "v0.1.0", policy: SkewRefuse, reason: ReasonCatalogSkew},
		{module: "example.com/app@v0", pinned: "v0.2.0", policy: SkewRefuse},
		{module: "example.com/app2@v0", pinned: "v0.1.0", policy: SkewWarn, warnings: 1},
		{module: "example.com/app2@v0", pinned: "v0.1.0", policy: SkewRefuse, reason: ReasonCatalogSkew},
		{module: "example.com/oldapp@v0"},
		{module: "example.com/broken@v0", reason: ReasonRenderFailed},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %s", tt.module, tt.pinned, tt.policy), func(t *testing.T) {
			g := NewWithT(t)
			req := registryRequest(reg, tt.module, cache)
			req.SkewPolicy = tt.policy
			if tt.pinned != "" {
				req.Catalogs = []Catalog{{Module: "example.com/catalog@v0", Version: tt.pinned}}
			}
			want := alone(t, req)
			g.Expect(want.Reason).To(Equal(tt.reason), "error: %s", want.Err)
			g.Expect(want.Warnings).To(HaveLen(tt.warnings))
			for range 2 {
				res, err := r.Render(context.Background(), req)
				g.Expect(outcomeOf(res, err)).To(Equal(want))
				if res != nil && len(res.Warnings) > 0 {
					res.Warnings[0] = "changed by the caller" // the next render has its own
				}
			}
		})
	}
}

// TestPreparedModuleSharedConcurrently renders prepared modules (local, and
// registry with a catalog dependency) from many goroutines at once, each
// with its own values, and checks each renderOutcome against a render alone. Under
// the race detector this checks that evaluation does not write to the shared
// syntax trees and instances, and that a CUE context serves one render at a
// time.
func TestPreparedModuleSharedConcurrently(t *testing.T) {
	reg := newTestRegistry(t)
	push(t, reg, "../examples/registry/catalog", "v0.1.0")
	push(t, reg, "../examples/registry/redis", "v0.1.0")
	cache := t.TempDir()
	request := func(i int) Request {
		req := Request{
			Name: fmt.Sprintf("app-%d", i), Namespace: "team-a",
			Values:   []byte(fmt.Sprintf(`{"replicas": %d}`, i%4)),
			Registry: &reg, CacheDir: cache,
			Catalogs: []Catalog{{Module: "cairn.dev/examples/catalog@v0", Version: "v0.1.0"}},
		}
		switch i % 4 {
		case 0:
			req.Source, req.LocalPath = examplesRepo, "modules/webapp"
		case 1:
			req.Source, req.LocalPath = testRepo, "modules/basic"
		case 2:
			req.CUEModule = &CUEModuleRef{Path: "cairn.dev/examples/redis@v0", Version: "v0.1.0"}
			req.Values = []byte(fmt.Sprintf(`{"maxMemory": "%dmb"}`, i))
		default:
			req.Source, req.LocalPath = testRepo, "modules/basic"
			req.Values = []byte(`{"replicas": "many"}`) // fails
		}
		return req
	}

	r := NewRendererWithOptions(RendererOptions{InProcess: true, MaxEvaluations: 2})
	for i := range 4 {
		_, _ = r.Render(context.Background(), request(i))
	}
	requests := make([]Request, 24)
	outcomes := make([]renderOutcome, len(requests))
	var wg sync.WaitGroup
	for i := range requests {
		requests[i] = request(i)
		wg.Go(func() { outcomes[i] = outcomeOf(r.Render(context.Background(), requests[i])) })
	}
	wg.Wait()

	g := NewWithT(t)
	for i, req := range requests {
		g.Expect(outcomes[i]).To(Equal(alone(t, req)), "render %d", i)
	}
	g.Expect(cachedModules(r)).To(Equal(3))
}

// TestContextReuseKeepsOutcomes renders modules of every kind, failing and
// not, one after the other on a Renderer with one evaluation slot, so that
// CUE contexts are reused across modules: each renderOutcome is the renderOutcome of the
// render alone.
func TestContextReuseKeepsOutcomes(t *testing.T) {
	var requests []Request
	for _, m := range []struct{ src, dir, values string }{
		{"examples", "modules/webapp", `{"replicas": 2, "ingress": {"host": "a.example.com"}}`},
		{"repo", "modules/basic", ""},
		{"repo", "modules/syntax", ""},
		{"repo", "modules/nomodfile", `{"greeting": "hi"}`},
		{"repo", "modules/badref", ""},
		{"examples", "modules/namespace", `{"name": "team-b"}`},
		{"repo", "modules/conflict", ""},
		{"repo", "modules/embedok", ""},
		{"repo", "modules/notconcrete", ""},
		{"repo", "modules/crd", ""},
		{"repo", "modules/basic", `{"replica": 3}`},
		{"repo", "modules/duplicate", ""},
		{"examples", "modules/webapp", `{"replicas": 3}`},
		{"repo", "modules/basic", `{"replicas": "three"}`},
		{"repo", "modules/scalar", ""},
		{"repo", "modules/invalid", ""},
		{"repo", "modules/basic", `{"replicas": 4}`},
	} {
		src := testRepo
		if m.src == "examples" {
			src = examplesRepo
		}
		requests = append(requests, Request{Name: "web", Namespace: "team-a", Source: src, LocalPath: m.dir, Values: []byte(m.values)})
	}

	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{InProcess: true, MaxEvaluations: 1})
	for round := range 2 {
		for _, req := range requests {
			got := outcomeOf(r.Render(context.Background(), req))
			g.Expect(got).To(Equal(alone(t, req)), "round %d: %s %s", round, req.LocalPath, req.Values)
		}
	}
}

func TestPreparedCacheBounds(t *testing.T) {
	g := NewWithT(t)
	mod := func(size int64) *preparedModule { return &preparedModule{size: size} }
	key := func(i int) preparedKey { return preparedKey{module: fmt.Sprint(i)} }

	c := newPreparedCache(2, 100)
	c.add(key(1), mod(10))
	c.add(key(2), mod(10))
	g.Expect(c.get(key(1))).NotTo(BeNil()) // 1 is now the most recently used
	c.add(key(3), mod(10))
	g.Expect(c.get(key(2))).To(BeNil(), "the least recently used entry is evicted")
	g.Expect(c.get(key(1))).NotTo(BeNil())
	n, _ := c.stats()
	g.Expect(n).To(Equal(2))

	c.add(key(4), mod(95))
	n, bytes := c.stats()
	g.Expect(n).To(Equal(1), "entries are evicted until the bytes fit")
	g.Expect(bytes).To(Equal(int64(95)))
	c.add(key(5), mod(101))
	g.Expect(c.get(key(5))).To(BeNil(), "a module larger than the bound is not kept")
	g.Expect(c.get(key(4))).NotTo(BeNil())

	c.add(key(4), mod(20))
	n, bytes = c.stats()
	g.Expect([]any{n, bytes}).To(Equal([]any{1, int64(20)}), "adding a key again replaces its entry")

	none := newPreparedCache(-1, 100)
	none.add(key(1), mod(1))
	g.Expect(none.get(key(1))).To(BeNil())
}

func TestPreparedCacheOptions(t *testing.T) {
	g := NewWithT(t)
	r := newInProcessRenderer()
	g.Expect(r.prepared.maxEntries).To(Equal(64))
	g.Expect(r.prepared.maxBytes).To(Equal(int64(256 << 20)))
	r = NewRendererWithOptions(RendererOptions{InProcess: true, MaxPreparedModules: -1})
	_, err := renderLocal(t, r, testRepo, "modules/basic", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cachedModules(r)).To(Equal(0))
}

func TestContextPoolBounds(t *testing.T) {
	g := NewWithT(t)
	p := newContextPool(1)
	c := p.get()
	for range maxContextUses - 1 {
		p.put(c, time.Microsecond)
		g.Expect(p.get()).To(BeIdenticalTo(c))
	}
	p.put(c, time.Microsecond)
	g.Expect(p.get()).NotTo(BeIdenticalTo(c), "a context is used at most maxContextUses times")

	slow := p.get()
	p.put(slow, maxContextBusy)
	g.Expect(p.get()).NotTo(BeIdenticalTo(slow), "a context is not reused after maxContextBusy of evaluation")

	a, b := p.get(), p.get()
	p.put(a, 0)
	p.put(b, 0)
	g.Expect(p.get()).To(BeIdenticalTo(a))
	g.Expect(p.get()).NotTo(BeIdenticalTo(b), "idle contexts beyond the pool size are dropped")
}

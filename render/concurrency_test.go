package render

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// TestRenderConcurrently runs ten renders at once on one Renderer (local and
// registry modules, one cache) and checks each against the same render done
// alone.
func TestRenderConcurrently(t *testing.T) {
	g := NewWithT(t)
	reg := newTestRegistry(t)
	push(t, reg, "../examples/registry/catalog", "v0.1.0")
	push(t, reg, "../examples/registry/redis", "v0.1.0")
	cache := t.TempDir()

	requests := make([]Request, 10)
	for i := range requests {
		req := Request{
			Name: fmt.Sprintf("app-%d", i), Namespace: "team-a",
			Values:   []byte(fmt.Sprintf(`{"replicas": %d}`, i)),
			Registry: &reg, CacheDir: cache,
			Catalogs: []Catalog{{Module: "cairn.dev/examples/catalog@v0", Version: "v0.1.0"}},
		}
		switch i % 3 {
		case 0:
			req.Source, req.LocalPath = examplesRepo, "modules/webapp"
		case 1:
			req.Source, req.LocalPath = testRepo, "modules/basic"
		default:
			req.CUEModule = &CUEModuleRef{Path: "cairn.dev/examples/redis@v0", Version: "v0.1.0"}
			req.Values = []byte(fmt.Sprintf(`{"maxMemory": "%dmb"}`, i))
		}
		requests[i] = req
	}

	r := NewRenderer()
	results := make([]*Result, len(requests))
	errs := make([]error, len(requests))
	var wg sync.WaitGroup
	for i, req := range requests {
		wg.Go(func() { results[i], errs[i] = r.Render(context.Background(), req) })
	}
	wg.Wait()

	alone := NewRenderer()
	for i, req := range requests {
		g.Expect(errs[i]).NotTo(HaveOccurred(), "render %d", i)
		want, err := alone.Render(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(results[i].Digest).To(Equal(want.Digest), "render %d", i)
		g.Expect(results[i].Objects).To(Equal(want.Objects), "render %d", i)
	}
}

package render

import (
	"context"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestRenderTimeout renders a module whose evaluation takes far longer than
// the deadline: Render returns RenderTimeout at the deadline.
func TestRenderTimeout(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/slow",
		Limits: Limits{Timeout: 300 * time.Millisecond}}

	start := time.Now()
	_, err := r.Render(context.Background(), req)
	elapsed := time.Since(start)

	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("timeout 300ms"))
	g.Expect(elapsed).To(BeNumerically("<", 2*time.Second))
}

// TestRenderTimeoutFromContext: the caller's deadline counts too, and a
// cancelled context ends the render.
func TestRenderTimeoutFromContext(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/slow"}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Render(ctx, req)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = r.Render(ctx, req)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(err).To(MatchError(context.Canceled))
}

// TestRenderAbandonedEvaluationsAreBounded: an evaluation that passed its
// deadline moves to the abandoned pool and stops delaying other renders; once
// that pool is full it keeps its running slot, and a render that finds no free
// slot before its deadline times out.
func TestRenderAbandonedEvaluationsAreBounded(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{InProcess: true, MaxEvaluations: 1, MaxAbandoned: 1})
	slow := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/slow",
		Limits: Limits{Timeout: 100 * time.Millisecond}}
	quick := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/nomodfile",
		Limits: Limits{Timeout: 200 * time.Millisecond}}

	_, err := r.Render(context.Background(), slow)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	// The first abandoned evaluation does not hold the running slot.
	_, err = r.Render(context.Background(), quick)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = r.Render(context.Background(), slow)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	// The abandoned pool is full: the second one keeps its running slot.
	_, err = r.Render(context.Background(), quick)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(err.Error()).To(ContainSubstring("waiting for an evaluation slot"))

	// Another Renderer has its own slots.
	_, err = newInProcessRenderer().Render(context.Background(), quick)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestRenderByteCap renders a module that produces 100 MB of JSON: it fails
// with LimitExceeded at the byte cap, in bounded time, and keeps nothing.
func TestRenderByteCap(t *testing.T) {
	g := NewWithT(t)
	req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/big",
		Limits: Limits{Timeout: time.Minute, MaxObjects: 20000, MaxBytes: 8 << 20}}

	start := time.Now()
	res, err := NewRenderer().Render(context.Background(), req)
	g.Expect(res).To(BeNil())
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded), "error: %v", err)
	g.Expect(err.Error()).To(MatchRegexp(`rendered objects exceed MaxBytes \(8388608 bytes\): \d+ bytes after \d+ of 10000 objects`))
	g.Expect(time.Since(start)).To(BeNumerically("<", 45*time.Second))

	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	g.Expect(m.HeapAlloc).To(BeNumerically("<", 100<<20), "the failed render must not be retained")
}

func TestRenderObjectCap(t *testing.T) {
	g := NewWithT(t)
	req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/many",
		Values: []byte(`{"count": 11, "size": 1}`), Limits: Limits{MaxObjects: 10}}
	_, err := NewRenderer().Render(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
	g.Expect(err.Error()).To(Equal("module renders 11 objects, more than MaxObjects (10)"))

	req.Values = []byte(`{"count": 10, "size": 1}`)
	res, err := NewRenderer().Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(10))
}

func TestRenderValuesCap(t *testing.T) {
	g := NewWithT(t)
	big := make([]byte, maxValuesBytes+10)
	copy(big, `{"greeting": "`)
	for i := 14; i < len(big)-2; i++ {
		big[i] = 'x'
	}
	copy(big[len(big)-2:], `"}`)
	_, err := renderLocal(t, NewRenderer(), testRepo, "modules/nomodfile", string(big))
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
	g.Expect(err.Error()).To(HavePrefix("values.json: values are larger than"))
}

func TestDefaultLimits(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DefaultLimits()).To(Equal(Limits{Timeout: 30 * time.Second, MaxObjects: 5000, MaxBytes: 32 << 20, MaxModuleBytes: 16 << 20, Memory: 512 << 20}))
	g.Expect(Limits{MaxObjects: 7, Memory: 1 << 20}.withDefaults()).To(Equal(Limits{Timeout: 30 * time.Second, MaxObjects: 7, MaxBytes: 32 << 20, MaxModuleBytes: 16 << 20, Memory: 1 << 20}))
}

package render

import (
	"context"
	"testing"
)

// benchRequest is one instance of the webapp example module (compare with
// `cue export` of the same module and values).
var benchRequest = Request{
	Name: "web", Namespace: "team-a", Source: examplesRepo, LocalPath: "modules/webapp",
	Values: []byte(`{"replicas": 3, "env": {"A": "1"}, "ingress": {"host": "web.example.com"}}`),
}

// BenchmarkRender renders one instance of the webapp example module with a
// Renderer that has rendered it before: the module is prepared in its worker.
func BenchmarkRender(b *testing.B) {
	r := NewRenderer()
	defer r.Close()
	renderBench(b, r) // starts the worker
	b.ReportAllocs()
	for b.Loop() {
		renderBench(b, r)
	}
}

// BenchmarkRenderInProcess is BenchmarkRender without worker processes: the
// difference is the cost of the worker protocol.
func BenchmarkRenderInProcess(b *testing.B) {
	r := newInProcessRenderer()
	b.ReportAllocs()
	for b.Loop() {
		renderBench(b, r)
	}
}

// BenchmarkRenderUncached renders the same instance with a new in-process
// Renderer each time: the module is read, pinned, loaded and evaluated.
func BenchmarkRenderUncached(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		renderBench(b, newInProcessRenderer())
	}
}

// BenchmarkRenderNewWorker renders the same instance with a new Renderer each
// time: a worker process is started, and prepares and evaluates the module.
func BenchmarkRenderNewWorker(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		r := NewRenderer()
		renderBench(b, r)
		r.Close()
	}
}

func renderBench(b *testing.B, r *Renderer) {
	res, err := r.Render(context.Background(), benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	if len(res.Objects) != 5 {
		b.Fatalf("rendered %d objects, want 5", len(res.Objects))
	}
}

// BenchmarkRenderTiny renders a module of one ConfigMap in a worker that has
// it prepared: mostly the fixed cost of the worker protocol.
func BenchmarkRenderTiny(b *testing.B) {
	r := NewRenderer()
	defer r.Close()
	benchTiny(b, r)
}

// BenchmarkRenderTinyInProcess is BenchmarkRenderTiny in this process.
func BenchmarkRenderTinyInProcess(b *testing.B) {
	benchTiny(b, newInProcessRenderer())
}

func benchTiny(b *testing.B, r *Renderer) {
	req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/nomodfile"}
	if _, err := r.Render(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

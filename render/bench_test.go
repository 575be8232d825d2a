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
// Renderer that has rendered it before: the module is prepared.
func BenchmarkRender(b *testing.B) {
	r := NewRenderer()
	b.ReportAllocs()
	for b.Loop() {
		renderBench(b, r)
	}
}

// BenchmarkRenderUncached renders the same instance with a new Renderer each
// time: the module is read, pinned, loaded and evaluated.
func BenchmarkRenderUncached(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		renderBench(b, NewRenderer())
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

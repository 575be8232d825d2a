package render

import (
	"context"
	"testing"
)

// BenchmarkRender renders one instance of the webapp example module (compare
// with `cue export` of the same module and values).
func BenchmarkRender(b *testing.B) {
	r := NewRenderer()
	req := Request{
		Name: "web", Namespace: "team-a", Source: examplesRepo, LocalPath: "modules/webapp",
		Values: []byte(`{"replicas": 3, "env": {"A": "1"}, "ingress": {"host": "web.example.com"}}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.Render(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Objects) != 5 {
			b.Fatalf("rendered %d objects, want 5", len(res.Objects))
		}
	}
}

package render

import (
	"context"
	"testing"
	"time"
)

// FuzzValues renders a small module with arbitrary bytes as the instance's
// values: it never panics, and either renders the one object or fails with a
// typed error about the values.
func FuzzValues(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `1`, `{"replicas": 3}`, `{"name": "web-1", "labels": {"a": "b"}}`,
		`{"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}`,
		`{"replicas": -1}`, `{"replicas": 1e400}`, `{"replicas": 1.5}`, `{"name": "UPPER"}`,
		`{"unknown": true}`, `{"labels": {"a": 1}}`, `{"enabled": "yes"}`, `{"a": {"b": {"c": [[[[{}]]]]}}}`,
		`{"name": "\u0000"}`, `{"labels": {"\"": "\\"}}`, `{"x": 1,}`, `{"replicas": 1} {"replicas": 2}`,
	} {
		f.Add([]byte(seed))
	}
	r := NewRenderer()
	f.Fuzz(func(t *testing.T, values []byte) {
		req := Request{Name: "web", Namespace: "team-a", Source: testRepo, LocalPath: "modules/fuzz",
			Values: values, Limits: Limits{Timeout: 10 * time.Second}}
		res, err := r.Render(context.Background(), req)
		if err != nil {
			switch Reason(err) {
			case ReasonRenderFailed, ReasonNotConcrete, ReasonLimitExceeded, ReasonInvalidObject:
			default:
				t.Fatalf("values %q: unexpected error %v", values, err)
			}
			if err.Error() == "" {
				t.Fatalf("values %q: empty error message", values)
			}
			return
		}
		if len(res.Objects) != 1 || res.Objects[0].GetKind() != "ConfigMap" || res.Objects[0].GetNamespace() != "team-a" {
			t.Fatalf("values %q: unexpected objects %v", values, res.Objects)
		}
	})
}

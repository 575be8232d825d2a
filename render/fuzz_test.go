package render

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	k8sjson "k8s.io/apimachinery/pkg/util/json"
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

// FuzzCanonicalJSON decodes arbitrary JSON as an object's content is decoded
// (k8s.io/apimachinery's json, integers kept as int64) and checks that
// canonicalJSON writes exactly what encoding/json writes, so that the
// digest of the objects does not depend on which one wrote it.
func FuzzCanonicalJSON(f *testing.F) {
	for _, seed := range []string{
		`null`, `true`, `0`, `-9223372036854775808`, `9223372036854775808`, `1.5`, `1e21`, `1e-7`, `-0.0`,
		`""`, `"plain"`, `"<a href=\"x\">&amp;</a>"`, `"tab\there\nnew\u0000\u001f\u007f"`, `"grüß ☃ \u2028 \u2029"`,
		`"\ud800"`, `[]`, `{}`, `[null, [], {}, [[1]], {"a": []}]`,
		`{"b": 1, "a": {"z": "y", "y": [1, 2.5, "x", false]}, "": null, "é": 1, "A": 2, "<": ">"}`,
	} {
		f.Add([]byte(seed))
	}
	for _, name := range []string{"basic", "webapp-full", "crd-scope"} {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := k8sjson.Unmarshal(data, &v); err != nil {
			return
		}
		want, wantErr := json.Marshal(v)
		w := canonicalJSON{}
		err := w.value(v)
		if (err != nil) != (wantErr != nil) || string(w.buf) != string(want) && err == nil {
			t.Fatalf("input %q: canonicalJSON wrote %q (error %v), encoding/json %q (error %v)", data, w.buf, err, want, wantErr)
		}
	})
}

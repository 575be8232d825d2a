package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// timoniRepo holds the Timoni-style test modules (written for these tests).
var timoniRepo = os.DirFS("testdata/timoni")

// cueBinary is the cue v0.17.1 CLI (see baselineCLI).
func cueBinary(t *testing.T) string {
	return baselineCLI(t, "cue", "v0.17.1", "CAIRN_CUE")
}

// cueExport runs `cue export` of the module in dir with Timoni's tags and
// returns the objects of timoni.apply.<set>.
func cueExport(t *testing.T, dir, set string, tags ...string) []map[string]any {
	t.Helper()
	args := []string{"export", "./", "-e", "timoni.apply." + set, "--out", "json"}
	for _, tag := range tags {
		args = append(args, "-t", tag)
	}
	cmd := exec.Command(cueBinary(t), args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cue %s: %v: %s", strings.Join(args, " "), err, stderrOf(err))
	}
	var objs []map[string]any
	if err := json.Unmarshal(out, &objs); err != nil {
		t.Fatalf("failed to decode cue export's output: %v", err)
	}
	return objs
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func renderTimoni(t *testing.T, r *Renderer, mod TimoniModule, values string) (*Result, error) {
	t.Helper()
	req := Request{Name: "web", Namespace: "team-a", Source: timoniRepo, Timoni: &mod}
	if values != "" {
		req.Values = []byte(values)
	}
	return r.Render(context.Background(), req)
}

func objectMaps(res *Result) []map[string]any {
	out := make([]map[string]any, len(res.Objects))
	for i, o := range res.Objects {
		out[i] = o.Object
	}
	return out
}

// jsonRoundTrip gives objects the types encoding/json decodes to (float64
// numbers), as cue export's output has.
func jsonRoundTrip(t *testing.T, objs []map[string]any) []map[string]any {
	t.Helper()
	data, err := json.Marshal(objs)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTimoniRenderMatchesCueExport renders the webapp module as cairn does and
// compares the objects with `cue export` of the same module with the same tags.
func TestTimoniRenderMatchesCueExport(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	defer r.Close()
	res, err := renderTimoni(t, r, TimoniModule{Path: "./webapp", Version: "1.2.3", KubeVersion: "v1.36.4"}, "")
	g.Expect(err).NotTo(HaveOccurred())
	want := cueExport(t, "testdata/timoni/webapp", "app", "name=web", "namespace=team-a", "mv=1.2.3", "kv=1.36.4")
	g.Expect(jsonRoundTrip(t, objectMaps(res))).To(ConsistOf(want))
	g.Expect(res.ModuleDigest).To(HavePrefix("sha256:"))
	g.Expect(res.Objects).To(HaveLen(3)) // the test set is empty: test.enabled defaults to false
}

// TestTimoniValuesOverrideDefaults checks that the instance's values win over
// values.cue's concrete defaults (a unification would conflict): the expected
// objects are cue export's of the module with a values.cue merged by hand.
func TestTimoniValuesOverrideDefaults(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	defer r.Close()
	values := `{"replicas": 3, "image": {"tag": "6.8.0"}, "env": {"COLOR": "green", "EXTRA": "x"}, "hosts": ["c.example.com"],
		"message": "hello", "test": {"enabled": true}}`
	res, err := renderTimoni(t, r, TimoniModule{Path: "webapp"}, values)
	g.Expect(err).NotTo(HaveOccurred())

	dir := filepath.Join(webappCopy(t, nil), "webapp")
	merged := `package main

values: {
	replicas: 3
	image: {repository: "ghcr.io/stefanprodan/podinfo", tag: "6.8.0"}
	service: port: 80
	env: {LOG_LEVEL: "info", COLOR: "green", EXTRA: "x"}
	hosts: ["c.example.com"]
	ratio:   1.5
	message: "hello"
	test: enabled: true
}
`
	g.Expect(os.WriteFile(filepath.Join(dir, "values.cue"), []byte(merged), 0o644)).To(Succeed())
	tags := []string{"name=web", "namespace=team-a", "mv=" + DevelopmentVersion, "kv=1.37.0"}
	want := append(cueExport(t, dir, "app", tags...), cueExport(t, dir, "test", tags...)...)
	got := jsonRoundTrip(t, objectMaps(res))
	g.Expect(got).To(ConsistOf(want))
	g.Expect(got).To(ContainElement(HaveKeyWithValue("kind", "Deployment")))
	for _, o := range res.Objects {
		if o.GetKind() == "Deployment" {
			replicas, _, _ := unstructuredInt(o.Object, "spec", "replicas")
			g.Expect(replicas).To(Equal(int64(3)))
		}
	}
}

// TestTimoniMergeValues is Timoni's merge: maps merge key by key, the
// overlay wins at every leaf, lists and scalars are replaced whole.
func TestTimoniMergeValues(t *testing.T) {
	tests := []struct {
		name                string
		base, overlay, want string
	}{
		{"leaf wins", `{"a": 1, "b": 2}`, `{"a": 3}`, `{"a": 3, "b": 2}`},
		{"maps merge deep", `{"m": {"x": 1, "n": {"y": 2, "z": 3}}}`, `{"m": {"n": {"z": 4}, "w": 5}}`, `{"m": {"x": 1, "n": {"y": 2, "z": 4}, "w": 5}}`},
		{"lists replaced whole", `{"l": [1, 2, 3]}`, `{"l": [4]}`, `{"l": [4]}`},
		{"map replaces scalar", `{"a": 1}`, `{"a": {"b": 2}}`, `{"a": {"b": 2}}`},
		{"scalar replaces map", `{"a": {"b": 2}}`, `{"a": "x"}`, `{"a": "x"}`},
		{"null overrides", `{"a": 1}`, `{"a": null}`, `{"a": null}`},
		{"new keys added", `{}`, `{"a": {"b": [1]}}`, `{"a": {"b": [1]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var base, overlay, want map[string]any
			g.Expect(decodeJSON([]byte(tt.base), &base)).To(Succeed())
			g.Expect(decodeJSON([]byte(tt.overlay), &overlay)).To(Succeed())
			g.Expect(decodeJSON([]byte(tt.want), &want)).To(Succeed())
			baseCopy, _ := json.Marshal(base)
			g.Expect(mergeValues(base, overlay)).To(Equal(want))
			after, _ := json.Marshal(base)
			g.Expect(after).To(Equal(baseCopy), "the base is not modified")
		})
	}
}

// TestTimoniValuesKeepNumberKinds checks that merged values keep ints and
// floats apart, as CUE has them (1.0 stays a float, 3 an int).
func TestTimoniValuesKeepNumberKinds(t *testing.T) {
	g := NewWithT(t)
	src, err := timoniValuesSource(mergeValues(map[string]any{"f": json.Number("1.0")}, map[string]any{"i": json.Number("3")}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(src)).To(ContainSubstring("f: 1.0"))
	g.Expect(string(src)).To(ContainSubstring("i: 3"))
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var v any = obj
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		v = m[f]
	}
	n, ok := v.(int64)
	return n, ok, nil
}

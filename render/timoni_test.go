package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// timoniRepo holds the Timoni-style test modules (written for these tests).
var timoniRepo = os.DirFS("testdata/timoni")

// cueBinary is the cue v0.17.1 CLI: $CAIRN_CUE (make test sets it), else the
// one hack/bench-tools.sh built. Outside make test, without either, the test
// is skipped.
func cueBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAIRN_CUE"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "cairn", "tools", "bin", "cue")
	if _, err := os.Stat(p); err != nil {
		t.Skip("cue v0.17.1 is missing: set CAIRN_CUE to its binary, or build it with hack/bench-tools.sh (make test does)")
	}
	return p
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

	dir := copyDir(t, "testdata/timoni/webapp")
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

// copyDir copies a directory of regular files into a temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestTimoniErrors asserts the reason, the file and line, and CUE's own
// message of failing Timoni renders, and the hint for a Timoni module declared
// as a local one.
func TestTimoniErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(t *testing.T, dir string) // changes a copy of the webapp module
		local   bool                           // render as module.local
		values  string
		reason  string
		file    string
		line    int
		message []string
	}{
		{name: "as a local module", local: true, reason: ReasonRenderFailed, file: "webapp/templates/deployment.cue", line: 3,
			message: []string{"import failed", "cue.mod/gen", "looks like a Timoni module", "module: {timoni: {path: webapp}}"}},
		{name: "values of the wrong type", values: `{"replicas": "three"}`, reason: ReasonRenderFailed, file: "webapp/templates/config.cue", line: 15,
			message: []string{"values.replicas", "conflicting values"}},
		{name: "values not an object", values: `[1]`, reason: ReasonRenderFailed, file: "values.json", message: []string{"values must be a JSON object"}},
		{name: "syntax error", edit: writeFile("templates/service.cue", "package templates\n\n#Service: {\n\tmetadata: name: \n}\n"),
			reason: ReasonRenderFailed, file: "webapp/templates/service.cue", line: 5, message: []string{"expected operand", "imported from webapp/timoni.cue:5:2"}},
		{name: "missing vendored package", edit: removeFile("cue.mod/gen/k8s.io/api/apps/v1/types.cue"),
			reason: ReasonModuleNotFound, file: "webapp/templates/deployment.cue", line: 3, message: []string{"import failed", `"k8s.io/api/apps/v1"`}},
		{name: "wrong api version", edit: replaceIn("timoni.cue", `apiVersion: "v1alpha1"`, `apiVersion: "v1beta9"`),
			reason: ReasonRenderFailed, file: "webapp/timoni.cue", line: 12, message: []string{`timoni.apiVersion "v1beta9" is not supported, must be "v1alpha1"`}},
		{name: "no timoni field", edit: replaceIn("timoni.cue", "timoni: {", "other: {"),
			reason: ReasonRenderFailed, message: []string{"module has no timoni field"}},
		{name: "non-concrete defaults with values", edit: replaceIn("values.cue", "replicas: 1", "replicas: int"), values: `{"ratio": 2.5}`,
			reason: ReasonNotConcrete, file: "webapp/values.cue", line: 7, message: []string{"values.replicas", "must be concrete"}},
		{name: "embed outside", edit: writeFile("embed.cue", "@extern(embed)\npackage main\n\nx: _ @embed(file=\"../secret.json\")\n"),
			reason: ReasonUnsafeModule, file: "webapp/embed.cue", message: []string{"parent directory"}},
		{name: "symbolic link", edit: symlink("cue.mod/pkg/link.cue", "../module.cue"),
			reason: ReasonUnsafeModule, file: "webapp/cue.mod/pkg/link.cue", message: []string{"symbolic links are not allowed"}},
		{name: "no module file", edit: removeFile("cue.mod/module.cue"), reason: ReasonModuleNotFound, file: "webapp/cue.mod/module.cue",
			message: []string{"has no cue.mod/module.cue"}},
	}
	r := NewRenderer()
	defer r.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := webappCopy(t, tt.edit)
			req := Request{Name: "web", Namespace: "team-a", Source: os.DirFS(root), Timoni: &TimoniModule{Path: "webapp"}}
			if tt.local {
				req.Timoni, req.LocalPath = nil, "webapp"
			}
			if tt.values != "" {
				req.Values = []byte(tt.values)
			}
			_, err := r.Render(context.Background(), req)
			g.Expect(err).To(HaveOccurred())
			var e *Error
			g.Expect(err).To(BeAssignableToTypeOf(e))
			e = err.(*Error)
			g.Expect(e.Reason).To(Equal(tt.reason), "%v", err)
			g.Expect(e.File).To(Equal(tt.file), "%v", err)
			if tt.line > 0 {
				g.Expect(e.Line).To(Equal(tt.line), "%v", err)
			}
			for _, m := range tt.message {
				g.Expect(err.Error()).To(ContainSubstring(m))
			}
			g.Expect(err.Error()).NotTo(ContainSubstring(os.TempDir()), "no path of the host")
		})
	}
}

// webappCopy copies the webapp module to <root>/webapp, changes it with edit (when
// not nil) and returns root.
func webappCopy(t *testing.T, edit func(*testing.T, string)) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "webapp")
	if err := os.CopyFS(dir, os.DirFS("testdata/timoni/webapp")); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(t, dir)
	}
	return root
}

func writeFile(name, content string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func removeFile(name string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func replaceIn(name, old, new string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), old) {
			t.Fatalf("%s has no %q (%v)", name, old, err)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(name, target string) func(*testing.T, string) {
	return func(t *testing.T, dir string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTimoniIgnoreAndDataFiles: files timoni.ignore lists are left out of the build
// (a broken one does not fail it), and a data file beside the package is not part of
// it, as with timoni build (and cue export).
func TestTimoniIgnoreAndDataFiles(t *testing.T) {
	g := NewWithT(t)
	root := webappCopy(t, func(t *testing.T, dir string) {
		writeFile("broken.cue", "package main\n\nx: {\n")(t, dir)
		writeFile("extra.yaml", "values:\n  message: from a data file\n")(t, dir)
	})
	dir := filepath.Join(root, "webapp")
	r := NewRenderer()
	defer r.Close()
	req := Request{Name: "web", Namespace: "team-a", Source: os.DirFS(root), Timoni: &TimoniModule{Path: "webapp"}}

	_, err := r.Render(context.Background(), req)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.(*Error).File).To(Equal("webapp/broken.cue"))

	replaceIn("timoni.ignore", "README.md", "README.md\nbroken.cue")(t, dir)
	res, err := r.Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	var data map[string]any
	for _, o := range res.Objects {
		if o.GetKind() == "ConfigMap" {
			data = o.Object["data"].(map[string]any)
		}
	}
	g.Expect(data).NotTo(HaveKey("message"))
	g.Expect(data).To(HaveKeyWithValue("COLOR", "blue"))
}

func TestTimoniKubeVersionTag(t *testing.T) {
	for in, want := range map[string]string{"": "1.37.0", "v1.36.4": "1.36.4", "1.30.5-gke.1014001": "1.30.5", "v1.31": "1.31.0",
		"v1.32.1+k3s1": "1.32.1"} {
		if got := tagKubeVersion(in); got != want {
			t.Errorf("tagKubeVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTimoniLimits: a Timoni module renders within the caps of every module: the
// deadline (its worker is stopped), the object cap and the cap on the bytes read.
func TestTimoniLimits(t *testing.T) {
	slow := "package main\n\nimport \"list\"\n\n_n: list.Range(0, 100, 1)\n" +
		"timoni: apply: slow: [{apiVersion: \"v1\", kind: \"ConfigMap\", metadata: name: \"slow\"\n" +
		"\tdata: count: \"\\(len([for a in _n for b in _n for c in _n if a+b+c < 0 {a}]))\"}]\n"
	tests := []struct {
		name    string
		edit    func(*testing.T, string)
		limits  Limits
		reason  string
		message string
	}{
		{"deadline", writeFile("slow.cue", slow), Limits{Timeout: 300 * time.Millisecond}, ReasonRenderTimeout, "timeout 300ms"},
		{"objects", nil, Limits{MaxObjects: 2}, ReasonLimitExceeded, "module renders 3 objects, more than MaxObjects (2)"},
		{"module bytes", nil, Limits{MaxModuleBytes: 1024}, ReasonLimitExceeded, `module "webapp" is too large`},
	}
	r := NewRenderer()
	defer r.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := webappCopy(t, tt.edit)
			start := time.Now()
			_, err := r.Render(context.Background(), Request{Name: "web", Namespace: "team-a", Source: os.DirFS(root),
				Timoni: &TimoniModule{Path: "webapp"}, Limits: tt.limits})
			g.Expect(Reason(err)).To(Equal(tt.reason), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
		})
	}
}

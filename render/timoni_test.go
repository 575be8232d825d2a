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

// TestTimoniMergeValues is Timoni's merge of a values file (timoni v0.33.0's
// engine.MergeValue; the expected texts are what it writes for the same inputs):
// the overlay wins at every leaf, structs merge field by field, lists merge element
// by element over the shorter list, and a list longer than the default's conflicts.
func TestTimoniMergeValues(t *testing.T) {
	base := `values: {
	replicas: 1
	image: {repository: "ghcr.io/x", tag: "1.0"}
	env: {LOG_LEVEL: "info", COLOR: "blue"}
	ports: [{name: "http", port: 80}, {name: "metrics", port: 9090}]
	hosts: ["a.example.com"]
	f: 1.0
}`
	tests := []struct {
		name, overlay, want, err string
	}{
		{name: "the user's order, maps deep, lists element by element",
			overlay: `{"zone": "b", "env": {"COLOR": "green", "EXTRA": "x"}, "replicas": 3, "ports": [{"name": "web"}]}`,
			want: `values: {
	zone: "b"
	env: {
		COLOR:     "green"
		EXTRA:     "x"
		LOG_LEVEL: "info"
	}
	ports: [{
		name: "web"
		port: 80
	}]
	replicas: 3
	f:        1.0
	hosts: ["a.example.com"]
	image: {
		repository: "ghcr.io/x"
		tag:        "1.0"
	}
}`},
		{name: "numbers keep their kind", overlay: `{"i": 3, "replicas": 2}`, want: `values: {
	i:        3
	replicas: 2
	env: {
		LOG_LEVEL: "info"
		COLOR:     "blue"
	}
	f: 1.0
	hosts: ["a.example.com"]
	image: {
		repository: "ghcr.io/x"
		tag:        "1.0"
	}
	ports: [{
		name: "http"
		port: 80
	}, {
		name: "metrics"
		port: 9090
	}]
}`},
		{name: "a list longer than the default's conflicts", overlay: `{"hosts": ["b.example.com", "c.example.com"]}`,
			err: "values.hosts: incompatible list lengths (1 and 2)"},
		{name: "a struct over a scalar conflicts", overlay: `{"env": "x"}`, err: "values.env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			src := &moduleSource{display: "m/", files: map[string][]byte{timoniValuesFile: []byte("package main\n" + base)},
				timoni: &timoniBuild{Values: []byte(tt.overlay)}}
			files, err := mergeTimoniValues(src)
			if tt.err != "" {
				g.Expect(err).To(MatchError(And(ContainSubstring(tt.err), ContainSubstring("as Timoni merges them"))))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(files[timoniValuesFile])).To(Equal("package main\n" + tt.want))
			g.Expect(string(src.files[timoniValuesFile])).To(Equal("package main\n"+base), "the module's files are not modified")
		})
	}
}

// TestTimoniValuesWithoutValuesKeepTheFiles: no values, null or {} leave values.cue
// as the module has it, as `timoni build` without --values does.
func TestTimoniValuesWithoutValuesKeepTheFiles(t *testing.T) {
	for _, values := range []string{"", "null", "{}", " { } "} {
		g := NewWithT(t)
		src := &moduleSource{files: map[string][]byte{timoniValuesFile: []byte("package main\nvalues: {a: 1}\n")},
			timoni: &timoniBuild{Values: []byte(values)}}
		files, err := mergeTimoniValues(src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(files[timoniValuesFile])).To(Equal("package main\nvalues: {a: 1}\n"), "values %q", values)
	}
}

// TestTimoniValuesKeepNonConcreteDefaults: a default that is not concrete stays as
// the module wrote it where the values do not set it, as Timoni merges it.
func TestTimoniValuesKeepNonConcreteDefaults(t *testing.T) {
	g := NewWithT(t)
	src := &moduleSource{files: map[string][]byte{timoniValuesFile: []byte("package main\nvalues: {\n\treplicas: int\n\tratio: 1.5\n}\n")},
		timoni: &timoniBuild{Values: []byte(`{"ratio": 2.5}`)}}
	files, err := mergeTimoniValues(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(files[timoniValuesFile])).To(Equal("package main\nvalues: {\n\tratio:    2.5\n\treplicas: int\n}"))
}

// TestTimoniValuesKeepTheUsersOrder renders the hashed module, which hashes its
// config into an annotation, with values that are not in sorted order: the objects,
// the hash included, are cue export's of the module with the values.cue that
// timoni build writes for those values (testdata/timoni/hashed-merged-values.cue),
// and the same values in sorted order hash differently.
func TestTimoniValuesKeepTheUsersOrder(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	defer r.Close()
	values := `{"zone": "b", "env": {"ZONE": "b", "APP": "x"}, "replicas": 3, "ports": [{"name": "web"}]}`
	res, err := renderTimoni(t, r, TimoniModule{Path: "hashed"}, values)
	g.Expect(err).NotTo(HaveOccurred())

	dir := filepath.Join(t.TempDir(), "hashed")
	g.Expect(os.CopyFS(dir, os.DirFS("testdata/timoni/hashed"))).To(Succeed())
	merged, err := os.ReadFile("testdata/timoni/hashed-merged-values.cue")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "values.cue"), merged, 0o644)).To(Succeed())
	want := cueExport(t, dir, "app", "name=web", "namespace=team-a")
	g.Expect(jsonRoundTrip(t, objectMaps(res))).To(Equal(want))
	hash := res.Objects[0].GetAnnotations()["checksum/config"]
	g.Expect(hash).To(HaveLen(64))

	sorted, err := renderTimoni(t, r, TimoniModule{Path: "hashed"},
		`{"env": {"APP": "x", "ZONE": "b"}, "ports": [{"name": "web"}], "replicas": 3, "zone": "b"}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sorted.Objects[0].GetAnnotations()["checksum/config"]).NotTo(Equal(hash), "the order of the values is part of the hash")
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

// TestTimoniVendoredPackageLinked: a Timoni module whose cue.mod/pkg is a symbolic
// link to a directory elsewhere in the repository, as Timoni's own modules keep it,
// renders as the module with a copy does; a link that leaves the repository fails
// naming it.
func TestTimoniVendoredPackageLinked(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	defer r.Close()
	want, err := renderTimoni(t, r, TimoniModule{Path: "webapp"}, "")
	g.Expect(err).NotTo(HaveOccurred())

	repo := webappCopy(t, nil)
	g.Expect(os.Rename(filepath.Join(repo, "webapp", "cue.mod", "pkg"), filepath.Join(repo, "schemas"))).To(Succeed())
	g.Expect(os.Symlink("../../schemas", filepath.Join(repo, "webapp", "cue.mod", "pkg"))).To(Succeed())
	req := Request{Name: "web", Namespace: "team-a", Source: os.DirFS(repo), Timoni: &TimoniModule{Path: "webapp"}}
	got, err := r.Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Digest).To(Equal(want.Digest))

	g.Expect(os.Remove(filepath.Join(repo, "webapp", "cue.mod", "pkg"))).To(Succeed())
	g.Expect(os.Symlink("../../../outside", filepath.Join(repo, "webapp", "cue.mod", "pkg"))).To(Succeed())
	_, err = r.Render(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonUnsafeModule))
	g.Expect(err.Error()).To(HavePrefix("webapp/cue.mod/pkg: symbolic link not followed: "))
	g.Expect(err.Error()).To(ContainSubstring("leaves the repository"))
}

package render

import (
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"cuelabs.dev/go/oci/ociregistry/ocimem"
	"cuelang.org/go/mod/modregistrytest"
	. "github.com/onsi/gomega"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// testRepo is the repository tree of the local test modules.
var testRepo = os.DirFS("testdata/repo")

// examplesRepo is the examples directory of the project, as a repository.
var examplesRepo = os.DirFS("../examples")

// newTestRegistry starts an in-process CUE module registry that accepts
// pushes, and returns where it is.
func newTestRegistry(t testing.TB) ModuleRegistry {
	t.Helper()
	srv, err := modregistrytest.NewServer(ocimem.New(), nil)
	if err != nil {
		t.Fatalf("failed to start the registry: %v", err)
	}
	t.Cleanup(srv.Close)
	return ModuleRegistry{Host: srv.Host(), PlainHTTP: true, Prefix: "cairn-modules"}
}

// push publishes a module directory to reg.
func push(t testing.TB, reg ModuleRegistry, dir, version string) string {
	t.Helper()
	digest, err := PushModule(context.Background(), dir, reg, version)
	if err != nil {
		t.Fatalf("failed to push %s %s: %v", dir, version, err)
	}
	return digest
}

// render renders a local test module with t's defaults.
func renderLocal(t testing.TB, r *Renderer, src fs.FS, dir string, values string) (*Result, error) {
	t.Helper()
	req := Request{Name: "web", Namespace: "team-a", Source: src, LocalPath: dir}
	if values != "" {
		req.Values = []byte(values)
	}
	return r.Render(context.Background(), req)
}

// golden is the JSON form of a result stored under testdata/golden.
type golden struct {
	Digest   string           `json:"digest"`
	Warnings []string         `json:"warnings,omitempty"`
	Objects  []map[string]any `json:"objects"`
	Hooks    []Hook           `json:"hooks,omitempty"`
}

// expectGolden compares a result with testdata/golden/<name>.json, or
// rewrites it under -update.
func expectGolden(t *testing.T, name string, res *Result) {
	t.Helper()
	g := NewWithT(t)
	out := golden{Digest: res.Digest, Warnings: res.Warnings, Hooks: res.Hooks}
	for _, o := range res.Objects {
		out.Objects = append(out.Objects, o.Object)
	}
	data, err := json.MarshalIndent(out, "", "  ")
	g.Expect(err).NotTo(HaveOccurred())
	data = append(data, '\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
		return
	}
	want, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred(), "missing golden file: run go test ./render/ -run %s -update", t.Name())
	g.Expect(string(data)).To(Equal(string(want)), "render output differs from %s (run with -update if intended)", path)
}

// recordingFS records every path opened or stat'ed through it.
type recordingFS struct {
	fs.FS
	mu    sync.Mutex
	paths []string
}

func (r *recordingFS) record(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, name)
}

func (r *recordingFS) Open(name string) (fs.File, error) {
	r.record(name)
	return r.FS.Open(name)
}

func (r *recordingFS) Stat(name string) (fs.FileInfo, error) {
	r.record(name)
	return fs.Stat(r.FS, name)
}

// outside returns the recorded paths that are not dir or below it.
func (r *recordingFS) outside(dir string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.paths {
		if p != dir && !strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

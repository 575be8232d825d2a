package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

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
		{name: "a list longer than the default's", values: `{"hosts": ["a", "b", "c"]}`, reason: ReasonRenderFailed,
			message: []string{"values.hosts: incompatible list lengths (2 and 3)", "as Timoni merges them"}},
		{name: "embed outside", edit: writeFile("embed.cue", "@extern(embed)\npackage main\n\nx: _ @embed(file=\"../secret.json\")\n"),
			reason: ReasonUnsafeModule, file: "webapp/embed.cue", message: []string{"parent directory"}},
		{name: "symbolic link out of the repository", edit: symlink("cue.mod/pkg/link.cue", "../../../../module.cue"),
			reason: ReasonUnsafeModule, file: "webapp/cue.mod/pkg/link.cue", message: []string{"symbolic link not followed", "leaves the repository"}},
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

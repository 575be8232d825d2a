package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

const minimalModule = `package app

instance: {name: string, namespace: string}
values: {}
objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name}
`

// TestRenderReadsOnlyTheModule records every file access to the repository:
// a render (even one that tries to embed a file outside the module) reads
// nothing outside the module directory.
func TestRenderReadsOnlyTheModule(t *testing.T) {
	for _, dir := range []string{"modules/basic", "modules/embedparent", "modules/embedabs", "modules/importoutside"} {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			rec := &recordingFS{FS: testRepo}
			_, _ = renderLocal(t, NewRenderer(), rec, dir, "")
			g.Expect(rec.paths).NotTo(BeEmpty())
			g.Expect(rec.outside(dir)).To(BeEmpty())
		})
	}
}

// TestRenderRefusesSymlinksThatLeave: a link that leaves the repository (absolute,
// or climbing above its root), a loop, a dangling link and a link into another
// tenant's paths fail the render naming the link, never showing what lies outside.
func TestRenderRefusesSymlinksThatLeave(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, link, target, message string
		tenants                     []TenantPaths
	}{
		{"absolute symlink to a data file", "data.json", secret, "absolute path", nil},
		{"relative symlink out of the repository", "up.cue", "../../../outside.cue", "leaves the repository", nil},
		{"symlinked directory", "sub", "/etc", "absolute path", nil},
		{"a loop", "loop", "../app", "a loop", nil},
		{"a chain that loops", "a.cue", "b.cue", "symbolic links are followed", nil},
		{"dangling", "gone.cue", "nowhere.cue", "does not exist", nil},
		{"into another tenant's paths", "pkg", "../../tenants/b", "belongs to tenant b, not to tenant a",
			[]TenantPaths{{Name: "a", Paths: []string{"modules/**"}}, {Name: "b", Paths: []string{"tenants/b/**"}}}},
		{"from the platform team's into a tenant's", "pkg", "../../tenants/b", "belongs to tenant b, not to the platform team",
			[]TenantPaths{{Name: "b", Paths: []string{"tenants/b/**"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			repo := t.TempDir()
			dir := filepath.Join(repo, "modules", "app")
			g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			g.Expect(os.MkdirAll(filepath.Join(repo, "tenants", "b"), 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(repo, "tenants", "b", "b.cue"), []byte("package app\n"), 0o644)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(dir, "main.cue"), []byte(minimalModule), 0o644)).To(Succeed())
			g.Expect(os.Symlink(tt.target, filepath.Join(dir, tt.link))).To(Succeed())
			if tt.link == "a.cue" {
				g.Expect(os.Symlink("a.cue", filepath.Join(dir, "b.cue"))).To(Succeed())
			}

			r := NewRenderer()
			defer r.Close()
			_, err := r.Render(context.Background(), Request{Name: "app", Namespace: "team-a", Source: os.DirFS(repo),
				LocalPath: "modules/app", Tenants: tt.tenants})
			g.Expect(Reason(err)).To(Equal(ReasonUnsafeModule), "error: %v", err)
			g.Expect(err.Error()).To(HavePrefix("modules/app/" + tt.link + ": symbolic link not followed: "))
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
			g.Expect(err.Error()).NotTo(ContainSubstring(repo))
		})
	}
}

// TestRenderFollowsSymlinksInsideTheRepository: a link to a file elsewhere in the
// repository, a link to a directory of the module and a chain of links render as
// copies would; the module digest covers the files read through them. (A Timoni
// module's cue.mod/pkg: TestTimoniVendoredPackageLinked.)
func TestRenderFollowsSymlinksInsideTheRepository(t *testing.T) {
	g := NewWithT(t)
	repo := t.TempDir()
	dir := filepath.Join(repo, "modules", "app")
	g.Expect(os.MkdirAll(filepath.Join(dir, "parts"), 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(repo, "shared"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(repo, "shared", "names.cue"), []byte("package app\n\n#Name: \"linked\"\n"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "parts", "cm.cue"), []byte(`package app

objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: #Name}
`), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "main.cue"), []byte("package app\n"), 0o644)).To(Succeed())
	g.Expect(os.Symlink("../../shared/names.cue", filepath.Join(dir, "via.cue.link"))).To(Succeed())
	g.Expect(os.Symlink("via.cue.link", filepath.Join(dir, "names.cue"))).To(Succeed())
	g.Expect(os.Symlink("parts/cm.cue", filepath.Join(dir, "cm.cue"))).To(Succeed())
	g.Expect(os.Remove(filepath.Join(dir, "parts", "cm.cue"))).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(repo, "objects"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(repo, "objects", "cm.cue"), []byte(`package app

objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: #Name}
`), 0o644)).To(Succeed())
	g.Expect(os.Remove(filepath.Join(dir, "parts"))).To(Succeed())
	g.Expect(os.Symlink("../../objects", filepath.Join(dir, "parts"))).To(Succeed())

	r := NewRenderer()
	defer r.Close()
	req := Request{Name: "app", Namespace: "team-a", Source: os.DirFS(repo), LocalPath: "modules/app"}
	res, err := r.Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(1))
	g.Expect(res.Objects[0].GetName()).To(Equal("linked"))

	g.Expect(os.WriteFile(filepath.Join(repo, "shared", "names.cue"), []byte("package app\n\n#Name: \"changed\"\n"), 0o644)).To(Succeed())
	again, err := r.Render(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Objects[0].GetName()).To(Equal("changed"))
	g.Expect(again.ModuleDigest).NotTo(Equal(res.ModuleDigest), "the digest covers the linked files")
}

func TestRenderIgnoresToolFilesAndLocalOverrides(t *testing.T) {
	g := NewWithT(t)
	src := fstest.MapFS{
		"m/cue.mod/module.cue":       {Data: []byte("module: \"example.com/m@v0\"\nlanguage: version: \"v0.17.0\"\n")},
		"m/cue.mod/local-module.cue": {Data: []byte(`deps: "example.com/x@v0": {v: "v0.1.0", replaceWith: "../../x"}` + "\n")},
		"m/main.cue":                 {Data: []byte(minimalModule)},
		"m/pwn_tool.cue":             {Data: []byte("package app\n\nimport \"tool/exec\"\n\ncommand: x: exec.Run & {cmd: \"true\"}\nobjects: tool: 1\n")},
		// A nested module is another module: its files are not part of m.
		"m/nested/cue.mod/module.cue": {Data: []byte("module: \"example.com/n@v0\"\nlanguage: version: \"v0.17.0\"\n")},
		"m/nested/main.cue":           {Data: []byte("package app\nobjects: nested: 1\n")},
	}
	res, err := renderLocal(t, NewRenderer(), src, "m", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(1))
	g.Expect(res.Objects[0].GetName()).To(Equal("web"))
}

// TestRenderCapsModuleFiles: the files a render reads (CUE files and the files
// they embed) count against Limits.MaxModuleBytes; a file no render reads does not.
func TestRenderCapsModuleFiles(t *testing.T) {
	embedding := "@extern(embed)\n" + minimalModule + "x: _ @embed(file=data.json)\n"
	tests := []struct {
		name  string
		files fstest.MapFS
		err   string // "" means the render succeeds
	}{
		{"blob beside the CUE files is not read", fstest.MapFS{
			"m/main.cue": {Data: []byte(minimalModule)},
			"m/blob.bin": {Data: []byte(strings.Repeat("x", 5<<10))},
		}, ""},
		{"CUE files over the cap", fstest.MapFS{
			"m/main.cue": {Data: []byte(minimalModule)},
			"m/big.cue":  {Data: []byte("package app\n// " + strings.Repeat("x", 5<<10) + "\n")},
		}, `module "m" is too large: the files a render reads (its CUE files and the files they embed) exceed maxModuleBytes (4096 bytes)`},
		{"embedded file counts", fstest.MapFS{
			"m/main.cue":  {Data: []byte(embedding)},
			"m/data.json": {Data: []byte(`{"a": "` + strings.Repeat("x", 5<<10) + `"}`)},
		}, `module "m" is too large`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			req := Request{Name: "web", Namespace: "team-a", Source: tt.files, LocalPath: "m", Limits: Limits{MaxModuleBytes: 4 << 10}}
			res, err := NewRenderer().Render(context.Background(), req)
			if tt.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Objects).To(HaveLen(1))
				return
			}
			g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
			g.Expect(err.Error()).To(ContainSubstring(tt.err))
		})
	}
}

func TestRenderSyntheticModuleFile(t *testing.T) {
	g := NewWithT(t)
	src := fstest.MapFS{"modules/My App!/main.cue": {Data: []byte(minimalModule)}}
	res, err := renderLocal(t, NewRenderer(), src, "modules/My App!", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(1))
	// The synthetic module file is not part of the module digest.
	g.Expect(res.ModuleDigest).To(Equal(filesDigest(map[string][]byte{"main.cue": []byte(minimalModule)})))
}

package gitsource

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadDirReadsRegularFilesAndSkipsGitMetadata(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"platform.yaml":         "kind: Platform\n",
		"modules/podinfo/x.cue": "x: 1\n",
		".git/config":           "[core]\n",
		"vendor/sub/.git":       "gitdir: ../../.git/modules/sub\n",
		".github/workflow.yaml": "on: push\n",
	})
	tree, err := ReadDir(dir, Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.Files()).To(Equal([]string{".github/workflow.yaml", "modules/podinfo/x.cue", "platform.yaml"}))
}

func TestReadDirRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		setup  func(t *testing.T, dir string)
		limits Limits
		want   error
		path   string
	}{
		"absolute symlink": {want: ErrUnsafePath, path: "secrets/passwd", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"secrets/keep": "x"})
			must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "secrets", "passwd")))
		}},
		"escaping symlink": {want: ErrUnsafePath, path: "up", setup: func(t *testing.T, dir string) {
			must(t, os.Symlink("../../..", filepath.Join(dir, "up")))
		}},
		"symlink loop": {want: ErrUnsafePath, path: "loop", setup: func(t *testing.T, dir string) {
			must(t, os.Symlink("loop", filepath.Join(dir, "loop")))
		}},
		"symlinked directory": {want: ErrUnsafePath, path: "mods", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"real/x.cue": "x"})
			must(t, os.Symlink("real", filepath.Join(dir, "mods")))
		}},
		"fifo": {want: ErrUnsafePath, path: "pipe", setup: func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
		}},
		"backslash name": {want: ErrUnsafePath, path: `a\\b`, setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{`a\b`: "x"})
		}},
		"upper-case .GIT": {want: ErrUnsafePath, path: ".GIT", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{".GIT/config": "x"})
		}},
		"too many files": {want: ErrTooLarge, limits: Limits{MaxFiles: 1}, setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"a": "a", "b": "b"})
		}},
		"LFS pointer": {want: ErrUnsupportedContent, path: "chart.tgz", setup: func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"chart.tgz": lfsPointer})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			tc.setup(t, dir)
			tree, err := ReadDir(dir, tc.limits)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(tree).To(BeNil())
			g.Expect(err.Error()).To(ContainSubstring(tc.path))
			g.Expect(err.Error()).NotTo(ContainSubstring("/etc/passwd"))
		})
	}
}

func TestReadDirListsAFileOverTheCapWithoutItsContent(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"big": strings.Repeat("x", 1025), "small": "ok"})
	tree, err := ReadDir(dir, Limits{MaxFileBytes: 1024})
	g.Expect(err).NotTo(HaveOccurred())
	expectOversized(g, tree, "big")
	small, ok := tree.Bytes("small")
	g.Expect(ok).To(BeTrue())
	g.Expect(small).To(Equal([]byte("ok")))
}

func TestReadDirMissing(t *testing.T) {
	g := NewWithT(t)
	_, err := ReadDir(filepath.Join(t.TempDir(), "missing"), Limits{})
	g.Expect(err).To(MatchError(os.ErrNotExist))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

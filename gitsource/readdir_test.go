package gitsource

import (
	"io/fs"
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

// TestReadDirListsSymlinksWithoutFollowingThem: links to absolute paths, out of the
// tree, to themselves or to a directory are listed as links, never followed.
func TestReadDirListsSymlinksWithoutFollowingThem(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"secrets/keep": "x", "real/x.cue": "x"})
	links := map[string]string{"secrets/passwd": "/etc/passwd", "up": "../../..", "loop": "loop", "mods": "real"}
	for p, target := range links {
		must(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(p))))
	}
	tree, err := ReadDir(dir, Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.Links()).To(ConsistOf("secrets/passwd", "up", "loop", "mods"))
	for p, target := range links {
		expectLink(g, tree, p, target)
	}
	g.Expect(tree.Files()).NotTo(ContainElement("mods/x.cue"), "a linked directory is not walked")
}

// TestReadDirLinkTargets: an absolute target inside the directory is made relative,
// as a link in a Git tree is; a retargeted link changes the digest.
func TestReadDirLinkTargets(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"schemas/a.cue": "a", "other/b.cue": "b"})
	abs, err := filepath.EvalSymlinks(dir)
	g.Expect(err).NotTo(HaveOccurred())
	must(t, os.MkdirAll(filepath.Join(dir, "mod", "cue.mod"), 0o755))
	must(t, os.Symlink(filepath.Join(abs, "schemas"), filepath.Join(dir, "mod", "cue.mod", "pkg")))
	tree, err := ReadDir(dir, Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	target, err := tree.ReadLink("mod/cue.mod/pkg")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(target).To(Equal("../../schemas"))
	before := tree.DigestDir("mod")

	must(t, os.Remove(filepath.Join(dir, "mod", "cue.mod", "pkg")))
	must(t, os.Symlink("../../other", filepath.Join(dir, "mod", "cue.mod", "pkg")))
	tree, err = ReadDir(dir, Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.DigestDir("mod")).NotTo(Equal(before))
	sub, err := tree.Sub("mod")
	g.Expect(err).NotTo(HaveOccurred())
	target, err = sub.ReadLink("cue.mod/pkg")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(target).To(Equal("../../other"), "Sub keeps the target")
	_, err = tree.ReadLink("other/b.cue")
	g.Expect(err).To(MatchError(fs.ErrInvalid), "not a link")
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

package gitsource

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

func mustTree(t *testing.T, files map[string]string) *Tree {
	t.Helper()
	b := newTreeBuilder(DefaultLimits())
	for p, c := range files {
		if err := b.add(p, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	return b.tree()
}

var sampleFiles = map[string]string{
	"platform.yaml":         "kind: Platform\n",
	"instances/a.yaml":      "a\n",
	"modules/podinfo/x.cue": "x: 1\n",
	"modules/podinfo/y.cue": "y: 1\n",
	"modules/podinfox.cue":  "sibling, not under modules/podinfo\n",
}

func TestTreeImplementsFS(t *testing.T) {
	g := NewWithT(t)
	tree := mustTree(t, sampleFiles)
	g.Expect(fstest.TestFS(tree, "platform.yaml", "instances/a.yaml", "modules/podinfo/x.cue")).To(Succeed())

	data, err := fs.ReadFile(tree, "modules/podinfo/x.cue")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("x: 1\n"))
	data[0] = 'X'
	again, _ := tree.Bytes("modules/podinfo/x.cue")
	g.Expect(string(again)).To(Equal("x: 1\n"), "ReadFile returns a copy")

	entries, err := fs.ReadDir(tree, "modules")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(2))
	g.Expect(entries[0].Name()).To(Equal("podinfo"))
	g.Expect(entries[0].IsDir()).To(BeTrue())

	info, err := fs.Stat(tree, "platform.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode()).To(Equal(fs.FileMode(0o644)))
	g.Expect(info.Size()).To(Equal(int64(len("kind: Platform\n"))))

	_, err = tree.Open("../platform.yaml")
	g.Expect(err).To(MatchError(fs.ErrInvalid))
	_, err = tree.Open("missing.yaml")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	_, err = tree.ReadFile("modules")
	g.Expect(err).To(HaveOccurred())
}

func TestTreeSubAndDigests(t *testing.T) {
	g := NewWithT(t)
	tree := mustTree(t, sampleFiles)
	g.Expect(tree.Files()).To(HaveLen(5))
	g.Expect(tree.Digest()).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	g.Expect(tree.DigestDir("")).To(Equal(tree.Digest()))
	g.Expect(tree.DigestDir(".")).To(Equal(tree.Digest()))

	sub, err := tree.Sub("modules/podinfo")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sub.Files()).To(Equal([]string{"x.cue", "y.cue"}), "a sibling with the same prefix is not under the dir")
	g.Expect(sub.Size()).To(Equal(int64(10)))
	g.Expect(tree.DigestDir("modules/podinfo")).To(Equal(sub.Digest()))
	g.Expect(tree.DigestDir("modules/podinfo/")).To(Equal(sub.Digest()))

	// A change elsewhere leaves the module digest alone; a change inside moves it.
	elsewhere := mustTree(t, with(sampleFiles, "instances/a.yaml", "changed\n"))
	g.Expect(elsewhere.DigestDir("modules/podinfo")).To(Equal(tree.DigestDir("modules/podinfo")))
	g.Expect(elsewhere.Digest()).NotTo(Equal(tree.Digest()))
	inside := mustTree(t, with(sampleFiles, "modules/podinfo/y.cue", "y: 2\n"))
	g.Expect(inside.DigestDir("modules/podinfo")).NotTo(Equal(tree.DigestDir("modules/podinfo")))

	// The encoding is unambiguous: moving bytes between path and content changes it.
	g.Expect(mustTree(t, map[string]string{"ab": "c"}).Digest()).
		NotTo(Equal(mustTree(t, map[string]string{"a": "bc"}).Digest()))

	_, err = tree.Sub("missing")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	_, err = tree.Sub("../x")
	g.Expect(err).To(MatchError(ErrUnsafePath))
	_, err = tree.Sub("platform.yaml")
	g.Expect(err).To(MatchError(fs.ErrNotExist))
	same, err := tree.Sub("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same.Digest()).To(Equal(tree.Digest()))
}

func with(files map[string]string, path, content string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	out[path] = content
	return out
}

func TestTreeBuilderRejectsClashes(t *testing.T) {
	g := NewWithT(t)
	b := newTreeBuilder(DefaultLimits())
	g.Expect(b.add("a/b", nil)).To(Succeed())
	g.Expect(b.add("a", nil)).To(MatchError(ErrUnsafePath))
	g.Expect(b.add("a/b", nil)).To(MatchError(ErrUnsafePath))
	g.Expect(b.add("a/b/c", nil)).To(MatchError(ErrUnsafePath))
}

func TestTreeWriteTo(t *testing.T) {
	g := NewWithT(t)
	tree := mustTree(t, sampleFiles)
	dir := filepath.Join(t.TempDir(), "out")
	g.Expect(tree.WriteTo(dir)).To(Succeed())

	read, err := ReadDir(dir, Limits{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read.Digest()).To(Equal(tree.Digest()))
	for _, p := range []string{"platform.yaml", "modules/podinfo/x.cue"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fi.Mode().Perm()).To(Equal(fs.FileMode(0o644)))
	}
	fi, err := os.Stat(filepath.Join(dir, "modules", "podinfo"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fi.Mode().Perm() & 0o700).To(Equal(fs.FileMode(0o700)))
}

func TestTreeWriteToNeverWritesOutside(t *testing.T) {
	g := NewWithT(t)
	outside := t.TempDir()
	dir := t.TempDir()
	// The target directory already holds a symlink that leads outside.
	g.Expect(os.Symlink(outside, filepath.Join(dir, "modules"))).To(Succeed())
	tree := mustTree(t, sampleFiles)
	err := tree.WriteTo(dir)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("modules/"))
	entries, err := os.ReadDir(outside)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty())
}

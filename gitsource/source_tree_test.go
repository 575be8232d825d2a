package gitsource

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
)

const lfsPointer = "version https://git-lfs.github.com/spec/v1\n" +
	"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"

// treeCase is a fixture tree that Source.Tree must reject.
type treeCase struct {
	name   string
	build  func(f *fixtureRepo) string // returns the commit
	limits Limits
	want   error
	path   string // named in the error
	secret string // content that must not appear in the error
	subdir string
}

func rawEntry(f *fixtureRepo, name string, mode filemode.FileMode, content string) object.TreeEntry {
	return object.TreeEntry{Name: name, Mode: mode, Hash: f.blob(content)}
}

func treeWith(entries ...func(f *fixtureRepo) object.TreeEntry) func(f *fixtureRepo) string {
	return func(f *fixtureRepo) string {
		es := []object.TreeEntry{rawEntry(f, "ok.yaml", filemode.Regular, "ok\n")}
		for _, e := range entries {
			es = append(es, e(f))
		}
		return f.commitTree(f.rawTree(es))
	}
}

func blobEntry(name string, mode filemode.FileMode, content string) func(f *fixtureRepo) object.TreeEntry {
	return func(f *fixtureRepo) object.TreeEntry { return rawEntry(f, name, mode, content) }
}

func dirEntry(name string, inner ...func(f *fixtureRepo) object.TreeEntry) func(f *fixtureRepo) object.TreeEntry {
	return func(f *fixtureRepo) object.TreeEntry {
		var es []object.TreeEntry
		for _, e := range inner {
			es = append(es, e(f))
		}
		return object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: f.rawTree(es)}
	}
}

func files(specs map[string]fileSpec) func(f *fixtureRepo) string {
	return func(f *fixtureRepo) string { return f.commitTree(f.buildTree(specs)) }
}

var treeCases = []treeCase{
	{name: "dot-dot entry", want: ErrUnsafePath, path: "..",
		build: treeWith(blobEntry("..", filemode.Regular, "x"))},
	{name: "dot-dot directory", want: ErrUnsafePath, path: "..",
		build: treeWith(dirEntry("..", blobEntry("evil.yaml", filemode.Regular, "x")))},
	{name: "dot entry", want: ErrUnsafePath, path: ".",
		build: treeWith(blobEntry(".", filemode.Regular, "x"))},
	{name: ".git directory", want: ErrUnsafePath, path: ".git",
		build: treeWith(dirEntry(".git", blobEntry("config", filemode.Regular, "[core]\n")))},
	{name: ".GIT file", want: ErrUnsafePath, path: "sub/.GIT",
		build: treeWith(dirEntry("sub", blobEntry(".GIT", filemode.Regular, "x")))},
	{name: ".git with trailing dot", want: ErrUnsafePath, path: ".git.",
		build: treeWith(dirEntry(".git.", blobEntry("hooks", filemode.Regular, "x")))},
	{name: "HFS ignorable .git", want: ErrUnsafePath, path: `.g\u200cit`,
		build: treeWith(blobEntry(".g\u200cit", filemode.Regular, "x"))},
	{name: "NTFS short name", want: ErrUnsafePath, path: "GIT~1",
		build: treeWith(blobEntry("GIT~1", filemode.Regular, "x"))},
	{name: "absolute name", want: ErrUnsafePath, path: "/etc/cron.d/x",
		build: treeWith(blobEntry("/etc/cron.d/x", filemode.Regular, "x"))},
	{name: "slash in a name", want: ErrUnsafePath, path: "a/../../b",
		build: treeWith(blobEntry("a/../../b", filemode.Regular, "x"))},
	{name: "backslash", want: ErrUnsafePath, path: `..\\..\\x`,
		build: treeWith(blobEntry(`..\..\x`, filemode.Regular, "x"))},
	{name: "control character", want: ErrUnsafePath, path: `a\nb`,
		build: treeWith(blobEntry("a\nb", filemode.Regular, "x"))},
	{name: "duplicate entry", want: ErrUnsafePath, path: "ok.yaml",
		build: treeWith(blobEntry("ok.yaml", filemode.Regular, "again"))},
	{name: "gitlink", want: ErrUnsafePath, path: "vendor/lib",
		build: files(map[string]fileSpec{
			"a.yaml":     {content: "a"},
			"vendor/lib": {mode: filemode.Submodule, content: "0123456789abcdef0123456789abcdef01234567"},
		})},
	{name: "total over the cap", want: ErrTooLarge, limits: Limits{MaxTotalBytes: 1500},
		build: files(map[string]fileSpec{"a": {content: strings.Repeat("a", 1000)}, "b": {content: strings.Repeat("b", 1000)}})},
	{name: "too many files", want: ErrTooLarge, limits: Limits{MaxFiles: 2},
		build: files(map[string]fileSpec{"a": {content: "a"}, "b": {content: "b"}, "c": {content: "c"}})},
	{name: "LFS pointer", want: ErrUnsupportedContent, path: "charts/big.tgz", secret: "oid sha256",
		build: files(map[string]fileSpec{"charts/big.tgz": {content: lfsPointer}})},
	{name: "subdir with dot-dot", want: ErrUnsafePath, subdir: "a/../b",
		build: files(map[string]fileSpec{"a/x": {content: "x"}})},
	{name: "subdir through a symlink", want: fs.ErrNotExist, subdir: "link",
		build: treeWith(blobEntry("link", filemode.Symlink, "/"))},
}

func TestTreeRejectsHostileEntries(t *testing.T) {
	for _, tc := range treeCases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			repo := newFixture(t)
			sha := tc.build(repo)
			s, err := New(Options{URL: repo.url(), CacheDir: t.TempDir(), Limits: tc.limits})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Fetch(ctx, sha)).To(Succeed())

			tree, err := s.Tree(ctx, sha, tc.subdir)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(tree).To(BeNil())
			g.Expect(err.Error()).To(ContainSubstring(repo.url()))
			if tc.path != "" {
				g.Expect(err.Error()).To(ContainSubstring(tc.path))
			}
			if tc.secret != "" {
				g.Expect(err.Error()).NotTo(ContainSubstring(tc.secret))
			}
			t.Log(err)
		})
	}
}

// TestTreeListsSymlinksWithoutFollowingThem: a symbolic link is listed in its
// directory as a link that cannot be opened, with an error naming it and never its
// target, so that only what reads that directory fails; the rest of the tree reads.
func TestTreeListsSymlinksWithoutFollowingThem(t *testing.T) {
	for _, tc := range []struct {
		name, path, target, subdir string
	}{
		{name: "absolute symlink", path: "secrets/token", target: "/etc/passwd"},
		{name: "escaping symlink", path: "a/escape", target: "../../../etc/shadow"},
		{name: "symlink to a file inside", path: "link", target: "ok.yaml"},
		{name: "under subdir", path: "link", target: "/etc/passwd", subdir: "mod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			repo := newFixture(t)
			full := tc.path
			if tc.subdir != "" {
				full = tc.subdir + "/" + tc.path
			}
			sha := repo.commitTree(repo.buildTree(map[string]fileSpec{
				"ok.yaml": {content: "ok"}, full: {mode: filemode.Symlink, content: tc.target}}))
			s, err := New(Options{URL: repo.url(), CacheDir: t.TempDir()})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Fetch(ctx, sha)).To(Succeed())
			tree, err := s.Tree(ctx, sha, tc.subdir)
			g.Expect(err).NotTo(HaveOccurred())
			expectLink(g, tree, tc.path, tc.target)
			if tc.subdir == "" {
				data, err := fs.ReadFile(tree, "ok.yaml")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(data)).To(Equal("ok"))
			}
		})
	}
}

// expectLink checks that p is listed as a symbolic link that cannot be read.
func expectLink(g Gomega, tree *Tree, p, target string) {
	g.Expect(tree.Links()).To(ContainElement(p))
	info, err := fs.Stat(tree, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode() & fs.ModeSymlink).NotTo(BeZero())
	_, err = fs.ReadFile(tree, p)
	g.Expect(err).To(MatchError(ErrUnsafePath))
	g.Expect(err.Error()).To(ContainSubstring(p))
	if !strings.Contains(p, target) {
		g.Expect(err.Error()).NotTo(ContainSubstring(target))
	}
	_, err = tree.Open(p)
	g.Expect(err).To(MatchError(ErrUnsafePath))
	g.Expect(tree.Link(p)).To(MatchError(ErrUnsafePath))
	entries, err := fs.ReadDir(tree, path.Dir(p))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(ContainElement(WithTransform(func(e fs.DirEntry) fs.FileMode { return e.Type() }, Equal(fs.ModeSymlink))))
	got, err := fs.ReadLink(tree, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(target), "the target as written, for a reader that checks where it leads")
	info, err = fs.Lstat(tree, p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode() & fs.ModeSymlink).NotTo(BeZero())
}

func TestTreeAcceptsExecutableAndNestedFiles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commitTree(repo.buildTree(map[string]fileSpec{
		"bin/run.sh":      {mode: filemode.Executable, content: "#!/bin/sh\n"},
		"a/b/c/d/e.yaml":  {content: "deep\n"},
		".gitignore":      {content: "x\n"},
		".github/ci.yaml": {content: "ci\n"},
	}))
	s := newTestSource(t, repo.url(), t.TempDir())
	g.Expect(s.Fetch(ctx, sha)).To(Succeed())
	tree, err := s.Tree(ctx, sha, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tree.Files()).To(Equal([]string{".github/ci.yaml", ".gitignore", "a/b/c/d/e.yaml", "bin/run.sh"}))
	g.Expect(tree.Size()).To(Equal(int64(len("#!/bin/sh\n") + len("deep\n") + len("x\n") + len("ci\n"))))
}

// TestTreeListsAFileOverTheCapWithoutItsContent: one oversized file does not fail
// the tree; it is listed with its size, and opening or reading it fails with
// ErrTooLarge, naming the cap, so that it fails only what reads it.
func TestTreeListsAFileOverTheCapWithoutItsContent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := newFixture(t)
	sha := repo.commitTree(repo.buildTree(map[string]fileSpec{
		"big/big.yaml": {content: strings.Repeat("x", 1025)},
		"small.yaml":   {content: "ok\n"},
	}))
	s, err := New(Options{URL: repo.url(), CacheDir: t.TempDir(), Limits: Limits{MaxFileBytes: 1024}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Fetch(ctx, sha)).To(Succeed())
	tree, err := s.Tree(ctx, sha, "")
	g.Expect(err).NotTo(HaveOccurred())
	expectOversized(g, tree, "big/big.yaml")
	g.Expect(tree.Size()).To(Equal(int64(3)), "the oversized file does not count towards the total")

	sub, err := tree.Sub("big")
	g.Expect(err).NotTo(HaveOccurred())
	expectOversized(g, sub, "big.yaml")
	g.Expect(sub.Digest()).To(Equal(tree.DigestDir("big")))
	g.Expect(sub.Digest()).NotTo(Equal((&Tree{}).Digest()))
}

func expectOversized(g *WithT, tree *Tree, p string) {
	g.Expect(tree.Files()).To(ContainElement(p))
	info, err := tree.Stat(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size()).To(Equal(int64(1025)))
	_, err = tree.Open(p)
	g.Expect(err).To(MatchError(ErrTooLarge))
	g.Expect(err.Error()).To(ContainSubstring("file is 1025 bytes, limit 1024"))
	_, err = tree.ReadFile(p)
	g.Expect(err).To(MatchError(ErrTooLarge))
	_, ok := tree.Bytes(p)
	g.Expect(ok).To(BeFalse())
	g.Expect(tree.Oversized(p)).To(MatchError(ErrTooLarge))
}

func TestTreeUnknownCommit(t *testing.T) {
	g := NewWithT(t)
	repo := newFixture(t)
	repo.commit(map[string]string{"a": "a"})
	s := newTestSource(t, repo.url(), t.TempDir())
	_, err := s.Tree(context.Background(), "0123456789abcdef0123456789abcdef01234567", "")
	g.Expect(err).To(MatchError(ErrUnknownRevision))
	_, err = s.Commit(context.Background(), "0123456789abcdef0123456789abcdef01234567")
	g.Expect(err).To(MatchError(ErrUnknownRevision))
}

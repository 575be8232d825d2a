package gitsource

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// assertSafePath fails when an accepted path could leave a root directory or
// touch Git metadata.
func assertSafePath(t *testing.T, p string) {
	t.Helper()
	if !fs.ValidPath(p) || p == "." || !filepath.IsLocal(p) {
		t.Fatalf("accepted path %q is not local", p)
	}
	if !utf8.ValidString(p) || strings.ContainsAny(p, "\\\x00") {
		t.Fatalf("accepted path %q has a backslash, NUL or invalid UTF-8", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." || elem == "." || strings.EqualFold(strings.TrimRight(elem, ". "), ".git") {
			t.Fatalf("accepted path %q has element %q", p, elem)
		}
	}
	if joined := filepath.Join("/root", p); !strings.HasPrefix(joined, "/root/") {
		t.Fatalf("accepted path %q escapes to %q", p, joined)
	}
}

func FuzzTreePath(f *testing.F) {
	for _, seed := range []string{
		"a/b.yaml", "../x", "a/../../b", "/etc/passwd", `a\b`, ".git/config", ".GIT", ".git.", "git~1",
		".g\u200cit", "a//b", "a/", "./a", "a/.", "", "\x00", "a\nb", "ok/.github/ci.yaml", "\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if checkPath(p) == nil {
			assertSafePath(t, p)
		}
	})
}

// fuzzModes are the entry modes a fuzzed tree draws from, hostile ones included.
var fuzzModes = []filemode.FileMode{
	filemode.Regular, filemode.Executable, filemode.Symlink, filemode.Submodule,
	filemode.Dir, filemode.Deprecated, filemode.FileMode(0o160001), filemode.FileMode(0o777),
}

// fuzzTree builds `levels` nested trees in memory: every level holds one entry
// per name, and directory entries point at the level below, so a few names
// can describe a deep or repetitive tree.
func fuzzTree(sto *memory.Storage, names []string, modes []byte, levels int) (plumbing.Hash, bool) {
	below := storeTree(sto, nil)
	for range levels {
		var entries []object.TreeEntry
		for i, name := range names {
			mode := fuzzModes[int(modes[i%len(modes)])%len(fuzzModes)]
			h := below
			if mode != filemode.Dir {
				h = storeBlob(sto, []byte(strings.Repeat(name, 1+i%3)))
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
		}
		var ok bool
		if below, ok = storeTreeChecked(sto, entries); !ok {
			return plumbing.ZeroHash, false
		}
	}
	return below, true
}

func storeBlob(sto *memory.Storage, data []byte) plumbing.Hash {
	obj := sto.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, _ := obj.Writer()
	_, _ = w.Write(data)
	_ = w.Close()
	h, _ := sto.SetEncodedObject(obj)
	return h
}

func storeTree(sto *memory.Storage, entries []object.TreeEntry) plumbing.Hash {
	h, _ := storeTreeChecked(sto, entries)
	return h
}

func storeTreeChecked(sto *memory.Storage, entries []object.TreeEntry) (plumbing.Hash, bool) {
	sort.Sort(object.TreeEntrySorter(entries))
	obj := sto.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, false
	}
	h, err := sto.SetEncodedObject(obj)
	return h, err == nil
}

func FuzzReadTree(f *testing.F) {
	f.Add("a.yaml\x00b\x00..\x00.git", []byte{0, 4, 2}, uint8(2))
	f.Add("x\x00y\x00z", []byte{4, 4, 0}, uint8(4))
	f.Add("/abs\x00a\\b\x00GIT~1\x00ok", []byte{0, 1, 5, 3}, uint8(1))
	f.Add("d\x00d\x00f", []byte{4, 0, 0}, uint8(3))
	f.Fuzz(func(t *testing.T, nameList string, modes []byte, levels uint8) {
		names := strings.Split(nameList, "\x00")
		if len(modes) == 0 || len(names) > 64 {
			return
		}
		sto := memory.NewStorage()
		root, ok := fuzzTree(sto, names, modes, 1+int(levels)%4)
		if !ok {
			return
		}
		limits := Limits{MaxFileBytes: 1 << 10, MaxTotalBytes: 1 << 14, MaxFiles: 200}
		tree, err := readTree(context.Background(), sto, root, "", limits)
		if err != nil {
			return
		}
		checkFuzzedTree(t, tree, limits)
	})
}

func checkFuzzedTree(t *testing.T, tree *Tree, limits Limits) {
	t.Helper()
	files := tree.Files()
	if len(files) > limits.MaxFiles || tree.Size() > limits.MaxTotalBytes {
		t.Fatalf("tree over the limits: %d files, %d bytes", len(files), tree.Size())
	}
	for _, p := range files {
		assertSafePath(t, p)
		if err := tree.Oversized(p); err != nil {
			// Listed, its content not read (a file over the cap, or a link): it
			// fails only what reads it.
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("file %q: %v", p, err)
			}
			if _, ok := tree.Bytes(p); ok && errors.Is(err, ErrTooLarge) {
				t.Fatalf("file %q over the cap, yet its content is held", p)
			}
			continue
		}
		if b, ok := tree.Bytes(p); !ok || int64(len(b)) > limits.MaxFileBytes {
			t.Fatalf("file %q missing or over the cap", p)
		}
	}
	walked := 0
	err := fs.WalkDir(tree, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			walked++
		}
		return err
	})
	if err != nil || walked != len(files) {
		t.Fatalf("walk found %d of %d files: %v", walked, len(files), err)
	}
	_ = tree.Digest()
}

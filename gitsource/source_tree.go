package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Tree returns the files of commit sha, or only those under subdir with
// paths relative to it. Every entry is checked (see the package
// documentation); the first offending entry fails the whole tree with an
// error naming its path, except a symbolic link, which is listed without its
// target (see Tree.Link) so that it fails only what reads its directory.
func (s *Source) Tree(ctx context.Context, sha, subdir string) (*Tree, error) {
	var t *Tree
	err := s.withCommit(sha, func(sto *filesystem.Storage, c *object.Commit) error {
		root, err := subTree(sto, c.TreeHash, subdir)
		if err != nil {
			return err
		}
		t, err = readTree(ctx, sto, root, subdir, s.opts.Limits)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read tree at %q of %s: %w", shortText(sha), s.remote.safeURL, err)
	}
	return t, nil
}

// subTree walks from the root tree down to subdir, one checked name at a time.
func subTree(sto storer.EncodedObjectStorer, root plumbing.Hash, subdir string) (plumbing.Hash, error) {
	dir, err := cleanDir(subdir)
	if err != nil || dir == "." {
		return root, err
	}
	h := root
	for _, name := range splitPath(dir) {
		t, err := object.GetTree(sto, h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		e, err := t.FindEntry(name)
		if err != nil || e.Mode != filemode.Dir {
			return plumbing.ZeroHash, fmt.Errorf("failed to open directory %s: %w", quotePath(dir), fs.ErrNotExist)
		}
		h = e.Hash
	}
	return h, nil
}

// treeWalk reads a Git tree into a treeBuilder.
type treeWalk struct {
	ctx   context.Context
	base  string // subdir the tree was read from, "" or "dir/", for messages
	sto   storer.EncodedObjectStorer
	b     *treeBuilder
	dirs  int
	limit Limits
}

type pendingTree struct {
	prefix string
	hash   plumbing.Hash
}

// readTree reads the tree root iteratively (no recursion, so depth costs no
// stack); directories count against MaxFiles as well, which bounds a tree
// that repeats one subtree many times.
func readTree(ctx context.Context, sto storer.EncodedObjectStorer, root plumbing.Hash, subdir string, l Limits) (*Tree, error) {
	w := &treeWalk{ctx: ctx, sto: sto, b: newTreeBuilder(l), limit: l, base: basePrefix(subdir)}
	stack := []pendingTree{{hash: root}}
	for len(stack) > 0 {
		next := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		subdirs, err := w.readDir(next)
		if err != nil {
			return nil, err
		}
		stack = append(stack, subdirs...)
	}
	return w.b.tree(), nil
}

// readDir adds the files of one tree object and returns its subtrees.
func (w *treeWalk) readDir(d pendingTree) ([]pendingTree, error) {
	if err := w.ctx.Err(); err != nil {
		return nil, err
	}
	t, err := object.GetTree(w.sto, d.hash)
	if err != nil {
		return nil, fmt.Errorf("failed to read directory %s: %w", quotePath(dirName(w.base+d.prefix)), err)
	}
	var subdirs []pendingTree
	for _, e := range t.Entries {
		p := d.prefix + e.Name
		if err := w.entry(p, e); err != nil {
			return nil, fmt.Errorf("path %s: %w", quotePath(w.base+p), err)
		}
		if e.Mode == filemode.Dir {
			subdirs = append(subdirs, pendingTree{prefix: p + "/", hash: e.Hash})
		}
	}
	return subdirs, nil
}

// entry checks one tree entry and adds it when it is a file.
func (w *treeWalk) entry(p string, e object.TreeEntry) error {
	if err := checkName(e.Name); err != nil {
		return err
	}
	switch e.Mode {
	case filemode.Dir:
		return w.countDir(p)
	case filemode.Regular, filemode.Executable, filemode.Deprecated:
		return w.file(p, e.Hash)
	case filemode.Symlink:
		// Listed with its target, never followed by the tree (see Tree.Link).
		return w.link(p, e.Hash)
	case filemode.Submodule:
		return fmt.Errorf("%w: submodule (gitlink); submodules are not fetched", ErrUnsafePath)
	}
	return fmt.Errorf("%w: unsupported mode %o", ErrUnsafePath, uint32(e.Mode))
}

func (w *treeWalk) countDir(p string) error {
	w.dirs++
	if w.dirs > w.limit.MaxFiles {
		return fmt.Errorf("%w: tree exceeds %d directories", ErrTooLarge, w.limit.MaxFiles)
	}
	return checkPath(p)
}

// link reads the target of a symbolic link, its blob, within the cap on targets.
func (w *treeWalk) link(p string, h plumbing.Hash) error {
	size, err := w.sto.EncodedObjectSize(h)
	if err != nil {
		return err
	}
	if size > maxLinkTarget {
		return fmt.Errorf("%w: symbolic link with a target of %d bytes", ErrUnsafePath, size)
	}
	target, err := readBlob(w.sto, h, size)
	if err != nil {
		return err
	}
	return w.b.addLink(p, string(target))
}

// file checks the blob's size against the limits before reading it.
func (w *treeWalk) file(p string, h plumbing.Hash) error {
	if err := checkPath(p); err != nil {
		return err
	}
	size, err := w.sto.EncodedObjectSize(h)
	if err != nil {
		return err
	}
	if w.b.isOversized(size) {
		return w.b.addOversized(p, size)
	}
	if err := w.b.reserve(p, size); err != nil {
		return err
	}
	data, err := readBlob(w.sto, h, size)
	if err != nil {
		return err
	}
	if isLFSPointer(data) {
		return fmt.Errorf("%w: Git LFS pointer (LFS objects are not fetched)", ErrUnsupportedContent)
	}
	return w.b.add(p, data)
}

func readBlob(sto storer.EncodedObjectStorer, h plumbing.Hash, size int64) ([]byte, error) {
	obj, err := sto.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, size+1))
	if err == nil && int64(len(data)) != size {
		err = errors.New("blob size does not match its header")
	}
	return data, err
}

// lfsPrefixes start the pointer files Git LFS stores instead of the content.
var lfsPrefixes = [][]byte{
	[]byte("version https://git-lfs.github.com/spec/v1\n"),
	[]byte("version https://hawser.github.com/spec/v1\n"),
}

// isLFSPointer: LFS pointers are under 1024 bytes and start with a version line.
func isLFSPointer(data []byte) bool {
	if len(data) >= 1024 {
		return false
	}
	for _, p := range lfsPrefixes {
		if bytes.HasPrefix(data, p) {
			return true
		}
	}
	return false
}

func dirName(prefix string) string {
	if prefix == "" {
		return "."
	}
	return prefix[:len(prefix)-1]
}

func basePrefix(subdir string) string {
	dir, err := cleanDir(subdir)
	if err != nil || dir == "." {
		return ""
	}
	return dir + "/"
}

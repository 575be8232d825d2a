package gitsource

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReadDir reads a local working directory (not a Git repository) into a Tree
// with the rules of Source.Tree: regular files only (a special file is
// ErrUnsafePath, a symlink is listed but never followed, see Tree.Link), checked names, LFS pointers refused, Limits enforced.
// Entries named exactly ".git" (the metadata of a checkout) are skipped.
// Files are opened through an os.Root, so nothing outside dir is read.
func ReadDir(dir string, limits Limits) (*Tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read directory %s: %w", quotePath(dir), err)
	}
	defer root.Close()
	r := &dirReader{root: root, b: newTreeBuilder(limits.withDefaults())}
	if abs, err := filepath.Abs(dir); err == nil {
		r.abs, _ = filepath.EvalSymlinks(abs)
	}
	if err := fs.WalkDir(root.FS(), ".", r.visit); err != nil {
		return nil, fmt.Errorf("failed to read directory %s: %w", quotePath(dir), err)
	}
	return r.b.tree(), nil
}

type dirReader struct {
	root *os.Root
	abs  string // dir, absolute, its own links resolved
	b    *treeBuilder
	dirs int
}

func (r *dirReader) visit(p string, d fs.DirEntry, err error) error {
	if err != nil {
		return err
	}
	if p == "." {
		return nil
	}
	if d.Name() == ".git" {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	if err := r.entry(p, d); err != nil {
		return fmt.Errorf("path %s: %w", quotePath(p), err)
	}
	return nil
}

func (r *dirReader) entry(p string, d fs.DirEntry) error {
	if err := checkPath(p); err != nil {
		return err
	}
	switch t := d.Type(); {
	case t.IsDir():
		r.dirs++
		if r.dirs > r.b.limits.MaxFiles {
			return fmt.Errorf("%w: tree exceeds %d directories", ErrTooLarge, r.b.limits.MaxFiles)
		}
		return nil
	case t.IsRegular():
		return r.file(p)
	case t&fs.ModeSymlink != 0:
		return r.link(p)
	}
	return fmt.Errorf("%w: not a regular file", ErrUnsafePath)
}

// link lists a symbolic link with its target (never followed here, see Tree.Link).
// An absolute target inside dir is made relative to the link's directory, as if
// the link had been written relative; any other absolute target stays as it is.
func (r *dirReader) link(p string) error {
	target, err := r.root.Readlink(p)
	if err != nil {
		return err
	}
	if filepath.IsAbs(target) && r.abs != "" {
		if rel, err := filepath.Rel(filepath.Join(r.abs, filepath.Dir(p)), target); err == nil && !escapes(filepath.Join(filepath.Dir(p), rel)) {
			target = rel
		}
	}
	return r.b.addLink(p, filepath.ToSlash(target))
}

// escapes reports whether a relative path climbs out of its root.
func escapes(p string) bool {
	p = filepath.ToSlash(filepath.Clean(p))
	return p == ".." || strings.HasPrefix(p, "../")
}

// file reads a regular file, checking its size before and while reading
// (the file may change under us).
func (r *dirReader) file(p string) error {
	f, err := r.root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrUnsafePath)
	}
	if r.b.isOversized(fi.Size()) {
		return r.b.addOversized(p, fi.Size())
	}
	if err := r.b.reserve(p, fi.Size()); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, r.b.limits.MaxFileBytes+1))
	if err != nil {
		return err
	}
	if isLFSPointer(data) {
		return fmt.Errorf("%w: Git LFS pointer", ErrUnsupportedContent)
	}
	return r.b.add(p, data)
}

package gitsource

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"time"
)

var (
	_ fs.FS         = (*Tree)(nil)
	_ fs.ReadFileFS = (*Tree)(nil)
	_ fs.ReadDirFS  = (*Tree)(nil)
	_ fs.StatFS     = (*Tree)(nil)
	_ fs.ReadLinkFS = (*Tree)(nil)
)

// ReadLink implements fs.ReadLinkFS: the target of a symbolic link, as written
// (relative to the link's directory, or absolute). The tree never follows it:
// whoever does decides where it may lead.
func (t *Tree) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	target, ok := t.links[name]
	if !ok {
		if _, err := t.stat("readlink", name); err != nil {
			return "", err
		}
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return target, nil
}

// Lstat implements fs.ReadLinkFS; the tree's Stat does not follow links either.
func (t *Tree) Lstat(name string) (fs.FileInfo, error) {
	return t.stat("lstat", name)
}

// Open implements fs.FS.
func (t *Tree) Open(name string) (fs.File, error) {
	info, err := t.stat("open", name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return &treeDir{info: info, entries: t.entries(name)}, nil
	}
	if err := t.Oversized(name); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &treeFile{info: info, Reader: bytes.NewReader(t.files[name])}, nil
}

// ReadFile implements fs.ReadFileFS; the caller owns the returned slice.
func (t *Tree) ReadFile(name string) ([]byte, error) {
	info, err := t.stat("read", name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	if err := t.Oversized(name); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return bytes.Clone(t.files[name]), nil
}

// ReadDir implements fs.ReadDirFS.
func (t *Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	info, err := t.stat("readdir", name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return t.entries(name), nil
}

// Stat implements fs.StatFS.
func (t *Tree) Stat(name string) (fs.FileInfo, error) {
	return t.stat("stat", name)
}

func (t *Tree) stat(op, name string) (*treeInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if n, big := t.oversized[name]; big {
		return &treeInfo{name: path.Base(name), size: n}, nil
	}
	if _, ok := t.links[name]; ok {
		return &treeInfo{name: path.Base(name), link: true}, nil
	}
	if b, ok := t.files[name]; ok {
		return &treeInfo{name: path.Base(name), size: int64(len(b))}, nil
	}
	if _, ok := t.dirs[name]; ok || name == "." {
		return &treeInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (t *Tree) entries(dir string) []fs.DirEntry {
	names := t.dirs[dir]
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		p := n
		if dir != "." {
			p = dir + "/" + n
		}
		info, _ := t.stat("readdir", p)
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	return out
}

// treeInfo is the fs.FileInfo of a file (0644), an implied directory (0755) or a
// symbolic link (fs.ModeSymlink).
type treeInfo struct {
	name string
	size int64
	dir  bool
	link bool // a symbolic link, never followed
}

func (i *treeInfo) Name() string       { return i.name }
func (i *treeInfo) Size() int64        { return i.size }
func (i *treeInfo) ModTime() time.Time { return time.Time{} }
func (i *treeInfo) IsDir() bool        { return i.dir }
func (i *treeInfo) Sys() any           { return nil }

func (i *treeInfo) Mode() fs.FileMode {
	switch {
	case i.dir:
		return fs.ModeDir | 0o755
	case i.link:
		return fs.ModeSymlink | 0o777
	}
	return 0o644
}

type treeFile struct {
	info *treeInfo
	*bytes.Reader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Close() error               { return nil }

type treeDir struct {
	info    *treeInfo
	entries []fs.DirEntry
	offset  int
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Close() error               { return nil }

func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir implements fs.ReadDirFile.
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.offset:]
	if n <= 0 {
		d.offset = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.offset += n
	return rest[:n], nil
}

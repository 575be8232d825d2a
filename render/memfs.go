package render

import (
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is an immutable in-memory file system of regular files. It is the only
// file system the CUE loader sees: a module can reach nothing that was not
// copied into it.
type memFS struct {
	files map[string][]byte   // clean slash paths without a leading slash
	dirs  map[string][]string // directory -> sorted child names
}

// newMemFS builds a file system from slash paths to contents.
func newMemFS(files map[string][]byte) *memFS {
	m := &memFS{files: files, dirs: map[string][]string{".": nil}}
	for name := range files {
		m.addParents(name)
	}
	for dir := range m.dirs {
		slices.Sort(m.dirs[dir])
		m.dirs[dir] = slices.Compact(m.dirs[dir])
	}
	return m
}

func (m *memFS) addParents(name string) {
	for name != "." {
		dir := path.Dir(name)
		m.dirs[dir] = append(m.dirs[dir], path.Base(name))
		name = dir
	}
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if data, ok := m.files[name]; ok {
		return &memFile{info: memInfo{name: path.Base(name), size: int64(len(data))}, data: data}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return &memDir{info: memInfo{name: path.Base(name), dir: true}, entries: m.entries(name)}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	data, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if _, ok := m.dirs[name]; !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return m.entries(name), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if data, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(data))}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) entries(dir string) []fs.DirEntry {
	names := m.dirs[dir]
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		full := path.Join(dir, n)
		_, isDir := m.dirs[full]
		out = append(out, fs.FileInfoToDirEntry(memInfo{name: n, dir: isDir, size: int64(len(m.files[full]))}))
	}
	return out
}

// subFS is a view of a directory of a memFS that also reports an absolute
// root, as the CUE loader requires of the file systems of dependency modules
// (module.OSRootFS). The root is a path inside the loader's memFS, never a
// host path.
type subFS struct {
	fs.FS
	root string
}

// OSRoot implements module.OSRootFS.
func (s subFS) OSRoot() string { return s.root }

func newSubFS(m *memFS, dir string) (subFS, error) {
	sub, err := fs.Sub(m, strings.TrimPrefix(dir, "/"))
	return subFS{FS: sub, root: dir}, err
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

type memFile struct {
	info memInfo
	data []byte
	off  int
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Read(p []byte) (int, error) {
	if f.off >= len(f.data) {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.off:])
	f.off += n
	return n, nil
}

type memDir struct {
	info    memInfo
	entries []fs.DirEntry
	off     int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(n, len(rest))]
	d.off += len(rest)
	return rest, nil
}

package gitsource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Tree is an immutable set of regular files held in memory, keyed by
// validated, slash-separated relative paths. Directories are implied by the
// file paths. It implements fs.FS, fs.ReadFileFS, fs.ReadDirFS and fs.StatFS.
//
// A file over Limits.MaxFileBytes is listed with its size but its content is
// not read: opening or reading it fails with ErrTooLarge, so that one
// oversized file fails only what reads it (see Oversized).
type Tree struct {
	files map[string][]byte
	// oversized maps the files over the size cap to their size; files holds
	// them with no content.
	oversized map[string]int64
	// links are the symbolic links of the tree and their targets, as written:
	// listed as fs.ModeSymlink entries and never followed by the tree itself (see
	// Link); ReadLink gives the target to a reader that checks where it leads.
	links map[string]string
	paths []string            // sorted
	dirs  map[string][]string // dir ("." for the root) -> sorted child names
	size  int64
	// maxFileBytes is the cap the oversized files exceed.
	maxFileBytes int64
}

// Files returns the paths of all files, sorted.
func (t *Tree) Files() []string {
	return append([]string(nil), t.paths...)
}

// Bytes returns the content of the file at path. The slice is shared: do not
// modify it. An oversized file has no content: ok is false.
func (t *Tree) Bytes(path string) ([]byte, bool) {
	if _, big := t.oversized[path]; big {
		return nil, false
	}
	b, ok := t.files[path]
	return b, ok
}

// Oversized returns the error of a file over the size cap (wrapping
// ErrTooLarge), or of a symbolic link (see Link), or nil for any other path.
func (t *Tree) Oversized(path string) error {
	if err := t.Link(path); err != nil {
		return err
	}
	n, big := t.oversized[path]
	if !big {
		return nil
	}
	return fmt.Errorf("%w: file is %d bytes, limit %d: its content is not read", ErrTooLarge, n, t.maxFileBytes)
}

// Link returns the error of a symbolic link (wrapping ErrUnsafePath), or nil
// for any other path. A link is listed in its directory (as an fs.ModeSymlink
// entry) so that one link fails only what reads that directory, with an error
// naming it; it is never followed, and its target is never read.
func (t *Tree) Link(path string) error {
	if _, ok := t.links[path]; !ok {
		return nil
	}
	return fmt.Errorf("%w: symbolic link (links are never followed)", ErrUnsafePath)
}

// Links returns the paths of the symbolic links, sorted.
func (t *Tree) Links() []string {
	var out []string
	for _, p := range t.paths {
		if _, ok := t.links[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// Size returns the total size of all files in bytes.
func (t *Tree) Size() int64 { return t.size }

// Sub returns the files under dir, with paths relative to dir. dir "" or "."
// is the whole tree; a dir that holds no file is an error wrapping
// fs.ErrNotExist.
func (t *Tree) Sub(dir string) (*Tree, error) {
	dir, err := cleanDir(dir)
	if err != nil {
		return nil, err
	}
	if dir == "." {
		return t, nil
	}
	if _, ok := t.dirs[dir]; !ok {
		return nil, fmt.Errorf("failed to open directory %s: %w", quotePath(dir), fs.ErrNotExist)
	}
	b := newTreeBuilder(Limits{MaxFileBytes: t.maxFileBytes}.withDefaults())
	b.unlimited = true
	for _, p := range t.under(dir) {
		rel := strings.TrimPrefix(p, dir+"/")
		var err error
		if n, big := t.oversized[p]; big {
			err = b.addOversized(rel, n)
		} else if target, ok := t.links[p]; ok {
			err = b.addLink(rel, target)
		} else {
			err = b.add(rel, t.files[p])
		}
		if err != nil {
			return nil, err
		}
	}
	return b.tree(), nil
}

// under returns the sorted paths below dir ("." for all).
func (t *Tree) under(dir string) []string {
	if dir == "." {
		return t.paths
	}
	prefix := dir + "/"
	lo := sort.SearchStrings(t.paths, prefix)
	hi := lo
	for hi < len(t.paths) && strings.HasPrefix(t.paths[hi], prefix) {
		hi++
	}
	return t.paths[lo:hi]
}

// cleanDir validates a directory argument; "" and "." mean the root.
func cleanDir(dir string) (string, error) {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" || dir == "." {
		return ".", nil
	}
	if err := checkPath(dir); err != nil {
		return "", fmt.Errorf("failed to use directory %s: %w", quotePath(dir), err)
	}
	return dir, nil
}

// Digest returns "sha256:<hex>" over the sorted (path, content) pairs.
func (t *Tree) Digest() string {
	return t.DigestDir(".")
}

// DigestDir is Digest for the files under dir, with paths relative to dir
// (so it equals Sub(dir).Digest()). An invalid or empty dir digests to the
// digest of an empty tree.
func (t *Tree) DigestDir(dir string) string {
	h := sha256.New()
	dir, err := cleanDir(dir)
	if err == nil {
		for _, p := range t.under(dir) {
			rel := p
			if dir != "." {
				rel = strings.TrimPrefix(p, dir+"/")
			}
			var n [8]byte
			size, big := t.oversized[p]
			if !big {
				size = int64(len(t.files[p]))
			}
			binary.BigEndian.PutUint64(n[:], uint64(size))
			h.Write([]byte(rel))
			h.Write([]byte{0})
			h.Write(n[:])
			if big {
				// Its content is unknown: its size stands for it.
				h.Write([]byte{0xff})
			}
			if target, ok := t.links[p]; ok {
				h.Write([]byte{0xfe}) // a link, and where it points
				h.Write([]byte(target))
			}
			h.Write(t.files[p])
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// treeBuilder collects files under Limits and rejects paths that are unsafe
// or that clash (a file where a directory is implied, or twice the same path).
type treeBuilder struct {
	limits    Limits
	unlimited bool // for Sub: the files were checked already
	files     map[string][]byte
	oversized map[string]int64
	links     map[string]string
	dirs      map[string]struct{}
	size      int64
}

func newTreeBuilder(l Limits) *treeBuilder {
	return &treeBuilder{limits: l, files: map[string][]byte{}, oversized: map[string]int64{}, links: map[string]string{},
		dirs: map[string]struct{}{}}
}

// maxLinkTarget caps the target of a symbolic link (PATH_MAX).
const maxLinkTarget = 4096

// addLink lists a symbolic link with its target (see Tree.Link). It counts
// against the number of files.
func (b *treeBuilder) addLink(p, target string) error {
	if len(target) > maxLinkTarget || target == "" || strings.ContainsRune(target, 0) {
		return fmt.Errorf("%w: symbolic link with an invalid target", ErrUnsafePath)
	}
	if err := b.placeUnread(p); err != nil {
		return err
	}
	b.links[p] = target
	return nil
}

// reserve checks that a file of size n at p fits the limits before its
// content is read.
func (b *treeBuilder) reserve(p string, n int64) error {
	switch {
	case b.unlimited:
		return nil
	case n > b.limits.MaxFileBytes:
		return fmt.Errorf("%w: file is %d bytes, limit %d", ErrTooLarge, n, b.limits.MaxFileBytes)
	case b.size+n > b.limits.MaxTotalBytes:
		return fmt.Errorf("%w: tree exceeds %d bytes", ErrTooLarge, b.limits.MaxTotalBytes)
	case len(b.files) >= b.limits.MaxFiles:
		return fmt.Errorf("%w: tree exceeds %d files", ErrTooLarge, b.limits.MaxFiles)
	}
	return nil
}

// isOversized reports whether a file of n bytes is over the size cap: it is
// then listed (addOversized) but not read.
func (b *treeBuilder) isOversized(n int64) bool {
	return !b.unlimited && n > b.limits.MaxFileBytes
}

// addOversized lists a file over the size cap without its content. It counts
// against the number of files, not against the total size.
func (b *treeBuilder) addOversized(p string, n int64) error {
	if err := b.placeUnread(p); err != nil {
		return err
	}
	b.oversized[p] = n
	return nil
}

// placeUnread lists an entry whose content is not read, counting it against the
// number of files.
func (b *treeBuilder) placeUnread(p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if !b.unlimited && len(b.files) >= b.limits.MaxFiles {
		return fmt.Errorf("%w: tree exceeds %d files", ErrTooLarge, b.limits.MaxFiles)
	}
	return b.place(p, nil)
}

// add stores a file; p must not have been added or implied as a directory.
func (b *treeBuilder) add(p string, data []byte) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if err := b.reserve(p, int64(len(data))); err != nil {
		return err
	}
	if err := b.place(p, data); err != nil {
		return err
	}
	b.size += int64(len(data))
	return nil
}

// place stores data at p, which must not have been added or implied as a
// directory.
func (b *treeBuilder) place(p string, data []byte) error {
	if _, dup := b.files[p]; dup {
		return fmt.Errorf("%w: duplicate path", ErrUnsafePath)
	}
	if _, isDir := b.dirs[p]; isDir {
		return fmt.Errorf("%w: file and directory share the path", ErrUnsafePath)
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, isFile := b.files[d]; isFile {
			return fmt.Errorf("%w: file and directory share the path %s", ErrUnsafePath, quotePath(d))
		}
		b.dirs[d] = struct{}{}
	}
	b.files[p] = data
	return nil
}

// tree freezes the builder into a Tree.
func (b *treeBuilder) tree() *Tree {
	t := &Tree{files: b.files, oversized: b.oversized, links: b.links, size: b.size, maxFileBytes: b.limits.MaxFileBytes, dirs: map[string][]string{".": nil}}
	for p := range b.files {
		t.paths = append(t.paths, p)
	}
	sort.Strings(t.paths)
	for d := range b.dirs {
		t.dirs[d] = nil
	}
	for _, p := range t.paths {
		t.link(p)
	}
	for d := range b.dirs {
		t.link(d)
	}
	for d := range t.dirs {
		sort.Strings(t.dirs[d])
	}
	return t
}

// link records p as a child of its parent directory.
func (t *Tree) link(p string) {
	parent := path.Dir(p)
	t.dirs[parent] = append(t.dirs[parent], path.Base(p))
}

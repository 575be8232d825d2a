package rendertask

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing/fstest"
	"time"
)

// Media types of the artifacts of a render task.
const (
	SourceArtifactType = "application/vnd.cairn.render-source.v1"
	SourceMedia        = "application/vnd.cairn.render-source.v1.tar"
	SourceFile         = "source.tar"
)

// MaxSourceBytes caps the source a task unpacks: the tar's own size, which the
// registry client's cap on an artifact bounds before it is downloaded, and the
// bytes its files add up to.
const MaxSourceBytes = 64 << 20

// PackSource packs the files under dirs of fsys (slash paths relative to its root,
// "." for all of it) into a tar: regular files and symbolic links, sorted by path,
// with no owner, a fixed time and mode 0644 (0755 for executables), so the same
// files always give the same bytes and the artifact is content-addressed. A link
// is kept as a link (the render decides, as in-process, whether it may follow
// it); fsys must then implement fs.ReadLinkFS.
func PackSource(fsys fs.FS, dirs []string) ([]byte, error) {
	names := map[string]fs.FileMode{}
	for _, dir := range dirs {
		dir = path.Clean(strings.TrimPrefix(dir, "./"))
		err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 || d.Type().IsRegular() {
				names[p] = d.Type()
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("failed to pack %s: %w", dir, err)
		}
	}
	sorted := make([]string, 0, len(names))
	for p := range names {
		sorted = append(sorted, p)
	}
	slices.Sort(sorted)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	for _, p := range sorted {
		h := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		if names[p]&fs.ModeSymlink != 0 {
			rl, ok := fsys.(fs.ReadLinkFS)
			if !ok {
				return nil, fmt.Errorf("failed to pack %s: a symbolic link, and the source cannot read links", p)
			}
			target, err := rl.ReadLink(p)
			if err != nil {
				return nil, fmt.Errorf("failed to pack %s: %w", p, err)
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("failed to pack %s: %w", p, err)
		}
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, int64(len(data)), 0o644
		if info, err := fs.Stat(fsys, p); err == nil && info.Mode()&0o111 != 0 {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// PackFiles packs files (slash paths to their contents) as PackSource packs a
// tree: for a module pulled from a registry, which travels alone in its source.
// fstest.MapFS is the standard library's in-memory fs.FS (no testing code).
func PackFiles(files map[string][]byte) ([]byte, error) {
	m := fstest.MapFS{}
	for name, data := range files {
		m[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return PackSource(m, []string{"."})
}

// UnpackSource writes the tar PackSource made into dir, which must be empty, and
// returns it as a file system (links read as links: os.DirFS implements
// fs.ReadLinkFS). Only clean relative paths, regular files and symbolic links are
// accepted; a link is written as it is, never followed here, and the files add up
// to at most MaxSourceBytes.
func UnpackSource(data []byte, dir string) (fs.FS, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	var total int64
	links := map[string]bool{} // written as links: no entry may be written through one
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("source artifact: %w", err)
		}
		name := h.Name
		if !fs.ValidPath(name) || name == "." {
			return nil, fmt.Errorf("source artifact: %q is not a clean relative path", name)
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if links[d] {
				return nil, fmt.Errorf("source artifact: %s is under the symbolic link %s", name, d)
			}
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return nil, fmt.Errorf("source artifact: %w", err)
			}
			links[name] = true
		case tar.TypeReg:
			if total += h.Size; h.Size < 0 || total > MaxSourceBytes {
				return nil, fmt.Errorf("source artifact: its files exceed the cap of %d bytes", MaxSourceBytes)
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return nil, fmt.Errorf("source artifact: %w", err)
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("source artifact: %w", err)
			}
		default:
			return nil, fmt.Errorf("source artifact: %s is neither a file nor a symbolic link", name)
		}
	}
	return os.DirFS(dir), nil
}

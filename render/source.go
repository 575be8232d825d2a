package render

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/inject/embed"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/mod/modfile"
)

// Caps on the source of one module (and of each dependency); the files a
// render reads from a local module are capped by Limits.MaxModuleBytes.
const (
	maxModuleFiles = 10000
	maxModuleBytes = 64 << 20
	maxFileBytes   = 16 << 20
)

const (
	modFilePath   = "cue.mod/module.cue"
	localModFile  = "cue.mod/local-module.cue"
	syntheticHost = "cairn.local"
	// LanguageVersion is the CUE language version of the module.cue that
	// cairn writes for a local module that has none.
	LanguageVersion = "v0.17.0"
)

// moduleSource is a module's files, relative to its root, and its parsed
// module file.
type moduleSource struct {
	name    string            // for messages: "modules/app" or "example.com/app@v0.1.0"
	display string            // prefix of file names in errors: "modules/app/", "example.com/app@v0.1.0/"
	files   map[string][]byte // slash paths relative to the module root
	modFile *modfile.File
	digest  string
	timoni  *timoniBuild // a Timoni module's build; nil for a cue or local module
}

// locate identifies the module the request names, for the prepared module
// cache: a local module is read (its files decide the key), a registry module
// is only named (path@version decides it) and fetched by source on a miss.
func locate(req Request, pins *pinner) (preparedKey, *moduleSource, error) {
	switch {
	case req.Timoni != nil && (req.LocalPath != "" || req.CUEModule != nil):
		return preparedKey{}, nil, newError(ReasonRenderFailed, "request names both a Timoni module and another module")
	case req.Timoni != nil:
		return locateTimoni(req)
	case req.LocalPath != "" && req.CUEModule != nil:
		return preparedKey{}, nil, newError(ReasonRenderFailed, "request names both a local module and a registry module")
	case req.CUEModule != nil:
		mv, err := moduleVersion(req.CUEModule.Path, req.CUEModule.Version)
		if err != nil {
			return preparedKey{}, nil, err
		}
		return newPreparedKey("registry:"+mv.String(), "", req, pins), nil, nil
	case req.LocalPath != "":
		src, err := readLocal(req)
		if err != nil {
			return preparedKey{}, nil, err
		}
		return newPreparedKey("local:"+src.name, src.digest, req, pins), src, nil
	}
	return preparedKey{}, nil, newError(ReasonModuleNotFound, "request names no module")
}

// source completes the source that locate found: the module file and the
// checks of a local module, or the fetch of a registry module.
func (r *Renderer) source(ctx context.Context, req Request, local *moduleSource) (*moduleSource, error) {
	if local == nil {
		return r.registrySource(ctx, req)
	}
	var err error
	if local.modFile, err = localModFileFor(local.files, local.display, local.name); err != nil {
		return nil, err
	}
	return local, local.check()
}

// readLocal reads a local module from the repository tree. The module
// directory is the module root: its own cue.mod/module.cue is used (or a
// synthetic one when it has none, see localModFileFor); directories above it
// are never read.
func readLocal(req Request) (*moduleSource, error) {
	dir, err := cleanLocalPath(req.LocalPath)
	if err != nil {
		return nil, err
	}
	if req.Source == nil {
		return nil, newError(ReasonModuleNotFound, "local module %q: no source tree", dir)
	}
	display := ""
	if dir != "." {
		display = dir + "/"
	}
	files, err := readLocalFiles(req.Source, dir, display, req.Limits.withDefaults().MaxModuleBytes, ownerOf(req.Tenants))
	if err != nil {
		return nil, err
	}
	return &moduleSource{name: dir, display: display, files: files, digest: filesDigest(files)}, nil
}

// cleanLocalPath turns "./modules/x" into "modules/x" and refuses paths that
// leave the repository.
func cleanLocalPath(p string) (string, error) {
	clean := path.Clean(strings.TrimPrefix(p, "./"))
	if path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p, `\`) {
		return "", &Error{Reason: ReasonUnsafeModule, File: p, Err: errors.New("local module path must stay inside the repository")}
	}
	return clean, nil
}

// readModuleFiles copies the regular files of the module at dir in fsys (see
// listModuleFiles), within maxModuleBytes.
func readModuleFiles(fsys fs.FS, dir, display string) (map[string][]byte, error) {
	names, paths, err := listModuleFiles(fsys, dir, display, nil)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(names))
	var total int64
	for _, rel := range names {
		data, err := readCapped(fsys, paths[rel], display+rel, maxFileBytes)
		if err != nil {
			return nil, err
		}
		if total += int64(len(data)); total > maxModuleBytes {
			return nil, newError(ReasonLimitExceeded, "module %q is too large: more than %d bytes", strings.TrimSuffix(display, "/"), maxModuleBytes)
		}
		files[rel] = data
	}
	return files, nil
}

func relPath(dir, p string) string {
	if p == dir {
		return ""
	}
	if dir == "." {
		return p
	}
	return strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
}

// skipEntry reports whether a walked entry stays out of the module, returning
// fs.SkipDir for directories.
func skipEntry(fsys fs.FS, p, rel string, d fs.DirEntry) (bool, error) {
	switch {
	case d.IsDir() && rel != "" && rel != "cue.mod" && isDir(fsys, path.Join(p, "cue.mod")):
		return true, fs.SkipDir // a nested module
	case d.IsDir() && d.Name() == ".git":
		return true, fs.SkipDir
	case !d.IsDir() && (strings.HasSuffix(rel, "_tool.cue") || rel == localModFile):
		return true, nil
	}
	return false, nil
}

func isDir(fsys fs.FS, p string) bool {
	info, err := fs.Stat(fsys, p)
	return err == nil && info.IsDir()
}

// readCapped reads one file, refusing files over limit bytes whatever their
// reported size.
func readCapped(fsys fs.FS, p, display string, limit int64) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, newError(ReasonModuleNotFound, "failed to open %s: %w", display, err)
	}
	defer f.Close()
	data, err := readAll(f, limit+1)
	if err != nil {
		return nil, newError(ReasonModuleNotFound, "failed to read %s: %w", display, err)
	}
	if int64(len(data)) > limit {
		return nil, &Error{Reason: ReasonLimitExceeded, File: display, Err: fmt.Errorf("file is larger than %d bytes", limit)}
	}
	return data, nil
}

// readAll reads at most limit bytes of f into a buffer sized by the size f
// reports (a hint only: the file may be shorter or longer).
func readAll(f fs.File, limit int64) ([]byte, error) {
	size := int64(512)
	if info, err := f.Stat(); err == nil && info.Size() >= 0 {
		size = min(info.Size()+1, limit) // one byte more to read EOF
	}
	data := make([]byte, 0, size)
	r := io.LimitReader(f, limit)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// localModFileFor parses the module's cue.mod/module.cue, or makes one:
// module "cairn.local/<dir name>@v0" at LanguageVersion.
func localModFileFor(files map[string][]byte, display, dir string) (*modfile.File, error) {
	if data, ok := files[modFilePath]; ok {
		return parseModFile(data, display+modFilePath)
	}
	mf := &modfile.File{
		Module:   syntheticHost + "/" + moduleName(dir) + "@v0",
		Language: &modfile.Language{Version: LanguageVersion},
	}
	return mf, nil
}

func parseModFile(data []byte, name string) (*modfile.File, error) {
	mf, err := modfile.Parse(data, name)
	if err != nil {
		return nil, fromCUE(ReasonRenderFailed, err)
	}
	return mf, nil
}

// moduleName makes a module path element out of a directory name.
func moduleName(dir string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(path.Base(dir)) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "module"
	}
	return b.String()
}

// check refuses a module without CUE files at its root or with @embed
// attributes that reach outside the module.
func (s *moduleSource) check() error {
	found := false
	for name := range s.files {
		if path.Dir(name) == "." && strings.HasSuffix(name, ".cue") {
			found = true
		}
	}
	if !found {
		return newError(ReasonModuleNotFound, "module %q has no CUE files at its root", s.name)
	}
	return checkEmbeds(s.files, s.display)
}

// checkEmbeds validates every @embed attribute with CUE's own rules (relative,
// normalised, no parent directory) before evaluation, so that such a module is
// refused as unsafe rather than failing somewhere in evaluation.
func checkEmbeds(files map[string][]byte, display string) error {
	return forEachEmbedding(files, display, func(name string, f *ast.File) error {
		if _, err := embed.EmbeddedPaths(name, f); err != nil {
			return fromCUE(ReasonUnsafeModule, err)
		}
		return nil
	})
}

// forEachEmbedding calls fn with every CUE file that has @embed attributes,
// parsed; files that do not parse are left to the loader, which reports
// syntax errors with their positions.
func forEachEmbedding(files map[string][]byte, display string, fn func(name string, f *ast.File) error) error {
	for _, name := range sortedKeys(files) {
		data := files[name]
		if !strings.HasSuffix(name, ".cue") || !bytes.Contains(data, []byte("@embed")) {
			continue
		}
		f, err := parser.ParseFile(display+name, data)
		if err != nil {
			continue
		}
		if err := fn(name, f); err != nil {
			return err
		}
	}
	return nil
}

// filesDigest is "sha256:<hex>" over the sorted list of "<sha256> <path>"
// lines of the files.
func filesDigest(files map[string][]byte) string {
	h := sha256.New()
	for _, name := range sortedKeys(files) {
		sum := sha256.Sum256(files[name])
		fmt.Fprintf(h, "%s %s\n", hex.EncodeToString(sum[:]), name)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

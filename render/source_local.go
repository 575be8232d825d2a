package render

import (
	"errors"
	"io/fs"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/inject/embed"
)

// readLocalFiles reads the files of a local module that a render reads: its
// CUE files (tool files and cue.mod/local-module.cue left out) and the other
// files that their @embed attributes name. Every file is listed, so that
// symbolic links and irregular files are refused wherever they are, but a file
// no render reads (a blob beside the CUE files, a README) is never opened and
// does not count against maxBytes, the cap on the bytes read.
func readLocalFiles(fsys fs.FS, dir, display string, maxBytes int64) (map[string][]byte, error) {
	names, err := listModuleFiles(fsys, dir, display)
	if err != nil {
		return nil, err
	}
	rd := &cappedReader{fsys: fsys, dir: dir, display: display, maxBytes: maxBytes, files: map[string][]byte{}}
	var others []string
	for _, rel := range names {
		if !strings.HasSuffix(rel, ".cue") {
			others = append(others, rel)
			continue
		}
		if err := rd.read(rel); err != nil {
			return nil, err
		}
	}
	embeds := embedsOf(rd.files, display)
	for _, rel := range others {
		if !embedded(embeds, rel) {
			continue
		}
		if err := rd.read(rel); err != nil {
			return nil, err
		}
	}
	return rd.files, nil
}

// cappedReader reads module files within one budget of bytes.
type cappedReader struct {
	fsys         fs.FS
	dir, display string
	maxBytes     int64
	total        int64
	files        map[string][]byte
}

func (r *cappedReader) read(rel string) error {
	data, err := readCapped(r.fsys, joinRel(r.dir, rel), r.display+rel, min(r.maxBytes, maxFileBytes))
	if err != nil {
		return r.tooLarge(err)
	}
	if r.total += int64(len(data)); r.total > r.maxBytes {
		return r.tooLarge(nil)
	}
	r.files[rel] = data
	return nil
}

// tooLarge names the module and the cap when a file or the module is over it.
func (r *cappedReader) tooLarge(err error) error {
	if err != nil && Reason(err) != ReasonLimitExceeded {
		return err
	}
	return newError(ReasonLimitExceeded, "module %q is too large: the files a render reads (its CUE files and the files they embed) exceed maxModuleBytes (%d bytes)",
		strings.TrimSuffix(r.display, "/"), r.maxBytes)
}

func joinRel(dir, rel string) string {
	if dir == "." {
		return rel
	}
	return dir + "/" + rel
}

// listModuleFiles lists the regular files of the module at dir in fsys,
// relative to dir, without reading them. Symbolic links and other irregular
// files are refused; nested modules (a subdirectory with its own cue.mod),
// tool files and local-module.cue are left out.
func listModuleFiles(fsys fs.FS, dir, display string) ([]string, error) {
	info, err := fs.Stat(fsys, dir)
	if err != nil || !info.IsDir() {
		return nil, newError(ReasonModuleNotFound, "module directory %q not found", strings.TrimSuffix(display, "/"))
	}
	var names []string
	walkErr := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := relPath(dir, p)
		if skip, err := skipEntry(fsys, p, rel, d); skip || err != nil || d.IsDir() {
			return err
		}
		if err := irregular(d, display+rel); err != nil {
			return err
		}
		if len(names) >= maxModuleFiles {
			return newError(ReasonLimitExceeded, "module %q is too large: more than %d files", strings.TrimSuffix(display, "/"), maxModuleFiles)
		}
		names = append(names, rel)
		return nil
	})
	if walkErr != nil {
		var e *Error
		if errors.As(walkErr, &e) {
			return nil, e
		}
		return nil, newError(ReasonModuleNotFound, "failed to read module %q: %w", strings.TrimSuffix(display, "/"), walkErr)
	}
	return names, nil
}

// embedsOf returns the valid @embed attributes of the CUE files (invalid ones
// are refused by checkEmbeds, syntax errors reported by the loader).
func embedsOf(files map[string][]byte, display string) []*embed.Embed {
	var out []*embed.Embed
	_ = forEachEmbedding(files, display, func(name string, f *ast.File) error {
		embeds, _ := embed.EmbeddedPaths(name, f)
		out = append(out, embeds...)
		return nil
	})
	return out
}

func embedded(embeds []*embed.Embed, rel string) bool {
	for _, e := range embeds {
		if e.Matches(rel) {
			return true
		}
	}
	return false
}

// irregular refuses a module file that is not a regular file, naming it: a
// symbolic link is never followed (a vendored cue.mod/pkg must hold copies).
func irregular(d fs.DirEntry, name string) error {
	switch t := d.Type(); {
	case t.IsRegular():
		return nil
	case t&fs.ModeSymlink != 0:
		return &Error{Reason: ReasonUnsafeModule, File: name,
			Err: errors.New("symbolic link: symbolic links are not allowed in modules and are never followed (vendor copies of the files instead)")}
	}
	return &Error{Reason: ReasonUnsafeModule, File: name, Err: errors.New("not a regular file (symbolic links are not allowed in modules)")}
}

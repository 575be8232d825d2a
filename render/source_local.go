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
func readLocalFiles(fsys fs.FS, dir, display string, maxBytes int64, owner func(string) string) (map[string][]byte, error) {
	names, paths, err := listModuleFiles(fsys, dir, display, owner)
	if err != nil {
		return nil, err
	}
	rd := &cappedReader{fsys: fsys, paths: paths, display: display, maxBytes: maxBytes, files: map[string][]byte{}}
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
	fsys     fs.FS
	paths    map[string]string // name -> file in fsys (see listModuleFiles)
	display  string
	maxBytes int64
	total    int64
	files    map[string][]byte
}

func (r *cappedReader) read(rel string) error {
	data, err := readCapped(r.fsys, r.paths[rel], r.display+rel, min(r.maxBytes, maxFileBytes))
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

// listModuleFiles lists the files of the module at dir in fsys, relative to
// dir, without reading them, and where each is in fsys (below a followed link,
// elsewhere than dir/name). Symbolic links are followed when they stay inside
// fsys and, with owner, inside the paths of the link's owner (see
// moduleLister); other irregular files are refused; nested modules (a
// subdirectory with its own cue.mod), tool files and local-module.cue are left
// out.
func listModuleFiles(fsys fs.FS, dir, display string, owner func(string) string) ([]string, map[string]string, error) {
	info, err := fs.Stat(fsys, dir)
	if err != nil || !info.IsDir() {
		return nil, nil, newError(ReasonModuleNotFound, "module directory %q not found", strings.TrimSuffix(display, "/"))
	}
	l := &moduleLister{fsys: fsys, display: display, owner: owner, paths: map[string]string{}}
	if walkErr := l.walk(dir, ""); walkErr != nil {
		var e *Error
		if errors.As(walkErr, &e) {
			return nil, nil, e
		}
		return nil, nil, newError(ReasonModuleNotFound, "failed to read module %q: %w", strings.TrimSuffix(display, "/"), walkErr)
	}
	return l.names, l.paths, nil
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

// irregular refuses a file that is not a regular file, naming it; a symbolic
// link here is one that is not followed (a kustomize directory's: kustomize
// reads files, and links among them are refused).
func irregular(d fs.DirEntry, name string) error {
	switch t := d.Type(); {
	case t.IsRegular():
		return nil
	case t&fs.ModeSymlink != 0:
		return &Error{Reason: ReasonUnsafeModule, File: name,
			Err: errors.New("symbolic link: symbolic links are not followed in a kustomize directory (vendor copies of the files instead)")}
	}
	return &Error{Reason: ReasonUnsafeModule, File: name, Err: errors.New("not a regular file")}
}

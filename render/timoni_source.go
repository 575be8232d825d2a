package render

import (
	"bufio"
	"bytes"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// timoniIgnoreFile lists, in .gitignore syntax, the files of a Timoni module
// that its builds leave out.
const timoniIgnoreFile = "timoni.ignore"

// readTimoniFiles reads the files of a Timoni module that a build reads, as
// `timoni build` copies the module: the files timoni.ignore matches are left
// out; then, as for a local module (see readLocalFiles), its CUE files and the
// files they @embed (the loader's DataFiles option only lets a directory
// without CUE files load: a JSON or YAML file beside the CUE files is not part
// of the package). Symbolic links that stay inside the repository (and the
// owner's paths) are followed, as Timoni's own modules keep cue.mod/pkg as one;
// others are refused, naming the link (see moduleLister).
func readTimoniFiles(fsys fs.FS, dir, display string, maxBytes int64, owner func(string) string) (map[string][]byte, error) {
	names, paths, err := listModuleFiles(fsys, dir, display, owner)
	if err != nil {
		return nil, err
	}
	rd := &cappedReader{fsys: fsys, paths: paths, display: display, maxBytes: maxBytes, files: map[string][]byte{}}
	ignored, err := timoniIgnored(rd, names)
	if err != nil {
		return nil, err
	}
	var others []string
	for _, rel := range names {
		switch {
		case ignored(rel):
		case strings.HasSuffix(rel, ".cue"):
			if err := rd.read(rel); err != nil {
				return nil, err
			}
		default:
			others = append(others, rel)
		}
	}
	embeds := embedsOf(rd.files, display)
	for _, rel := range others {
		if embedded(embeds, rel) {
			if err := rd.read(rel); err != nil {
				return nil, err
			}
		}
	}
	delete(rd.files, timoniIgnoreFile)
	return rd.files, nil
}

// timoniIgnored reads timoni.ignore (when the module has one) and returns
// whether a file is left out: it is, or one of its directories is, matched by
// the patterns (the last matching pattern decides, "!" re-includes).
func timoniIgnored(rd *cappedReader, names []string) (func(string) bool, error) {
	var patterns []gitignore.Pattern
	for _, rel := range names {
		if rel != timoniIgnoreFile {
			continue
		}
		if err := rd.read(rel); err != nil {
			return nil, err
		}
		patterns = parseIgnore(rd.files[rel])
	}
	if len(patterns) == 0 {
		return func(string) bool { return false }, nil
	}
	m := gitignore.NewMatcher(patterns)
	return func(rel string) bool {
		parts := strings.Split(rel, "/")
		for i := 1; i <= len(parts); i++ {
			if m.Match(parts[:i], i < len(parts)) {
				return true
			}
		}
		return false
	}, nil
}

// parseIgnore parses .gitignore lines; blank lines and comments are skipped.
func parseIgnore(data []byte) []gitignore.Pattern {
	var out []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, gitignore.ParsePattern(line, nil))
	}
	return out
}

package declarations

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// readTree reads every YAML file under the configured path.
func (l *loader) readTree() error {
	root := path.Clean(l.opts.Path)
	if !fs.ValidPath(root) {
		return &Error{Reason: ReasonInvalidPath, File: l.opts.Path, Message: "path must be relative to the root of the tree and stay inside it"}
	}
	info, err := fs.Stat(l.fsys, root)
	if err != nil || !info.IsDir() {
		return &Error{Reason: ReasonInvalidPath, File: root, Message: "path is not a directory of the tree"}
	}
	return fs.WalkDir(l.fsys, root, func(p string, d fs.DirEntry, err error) error {
		return l.visit(root, p, d, err)
	})
}

func (l *loader) visit(root, p string, d fs.DirEntry, err error) error {
	switch {
	case err != nil && p == root:
		return &Error{Reason: ReasonInvalidPath, File: root, Message: fmt.Sprintf("failed to read directory: %v", err)}
	case err != nil:
		l.unparsed(&Error{Reason: ReasonInvalidDeclaration, File: p, Message: fmt.Sprintf("failed to read: %v", err)})
		return nil
	case d.IsDir() && d.Name() == ".git" && p != root:
		return fs.SkipDir
	case d.IsDir() && p != root && isChart(l.fsys, p):
		// A Helm chart kept in the repository: its YAML is templates, not declarations.
		return fs.SkipDir
	case d.IsDir() || !isYAML(p):
		return nil
	case !d.Type().IsRegular():
		l.unparsed(&Error{Reason: ReasonInvalidDeclaration, File: p, Message: "not a regular file (symbolic links are not followed)"})
		return nil
	}
	data, rerr := l.readFile(p)
	if rerr != nil {
		l.unparsed(rerr)
		return nil
	}
	return l.parseFile(p, data)
}

// isChart reports whether directory p is a Helm chart (holds a Chart.yaml).
func isChart(fsys fs.FS, p string) bool {
	info, err := fs.Stat(fsys, path.Join(p, "Chart.yaml"))
	return err == nil && info.Mode().IsRegular()
}

func isYAML(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}

// readFile reads p, refusing files over the size cap before and while reading them.
func (l *loader) readFile(p string) ([]byte, *Error) {
	tooLarge := &Error{Reason: ReasonTooLarge, File: p, Message: fmt.Sprintf("file is larger than %d bytes", l.opts.MaxFileBytes)}
	f, err := l.fsys.Open(p)
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidDeclaration, File: p, Message: fmt.Sprintf("failed to open file: %v", err)}
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > l.opts.MaxFileBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, l.opts.MaxFileBytes+1))
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return nil, &Error{Reason: ReasonInvalidDeclaration, File: p, Message: fmt.Sprintf("failed to read file: %v", err)}
	case int64(len(data)) > l.opts.MaxFileBytes:
		return nil, tooLarge
	}
	return data, nil
}

// unparsed records a file whose declarations are unknown.
func (l *loader) unparsed(e *Error) {
	l.invalid = append(l.invalid, e)
	if len(l.set.Unparsed) == 0 || l.set.Unparsed[len(l.set.Unparsed)-1] != e.File {
		l.set.Unparsed = append(l.set.Unparsed, e.File)
	}
}

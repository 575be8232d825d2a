package declarations

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
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
	l.readFirst(p, d)
	return nil
}

// readFirst reads and parses a file in the first pass, before the Platform's caps are
// known, within the default cap on its size and the loader's ceiling on its documents.
// A larger file is deferred until its cap is known (see admitDeferred), which is at
// most the loader's ceiling: it is refused unread when over its cap.
func (l *loader) readFirst(p string, d fs.DirEntry) {
	f := &file{path: p, size: -1}
	if info, err := d.Info(); err == nil {
		f.size = info.Size()
	}
	first := byteCap{min(l.opts.MaxFileBytes, cairnv1.DefaultMaxFileBytes), ""}
	if f.size > first.n {
		l.deferred = append(l.deferred, f)
		return
	}
	data, rerr := l.readFile(p, first)
	switch {
	case rerr != nil && rerr.Reason == ReasonTooLarge:
		l.deferred = append(l.deferred, f)
	case rerr != nil:
		l.unparsed(rerr)
	default:
		f.size = int64(len(data))
		if l.parseFile(f, data, l.opts.MaxFileDocuments) {
			l.files = append(l.files, f)
		}
	}
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
func (l *loader) readFile(p string, limit byteCap) ([]byte, *Error) {
	tooLarge := limit.exceeded(p)
	f, err := l.fsys.Open(p)
	if err != nil {
		return nil, &Error{Reason: ReasonInvalidDeclaration, File: p, Message: fmt.Sprintf("failed to open file: %v", err)}
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > limit.n {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, limit.n+1))
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return nil, &Error{Reason: ReasonInvalidDeclaration, File: p, Message: fmt.Sprintf("failed to read file: %v", err)}
	case int64(len(data)) > limit.n:
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

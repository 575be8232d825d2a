package gitsource

import (
	"fmt"
	"os"
	"path"
)

// WriteTo materialises the tree under dir (created if missing): regular files
// 0644 and directories 0755. Writes go through an os.Root, so nothing is
// written outside dir even if dir already holds symlinks; existing files are
// overwritten, other content of dir is left alone. Oversized files, whose
// content is not held, and symbolic links are not written.
func (t *Tree) WriteTo(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create directory %s: %w", quotePath(dir), err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("failed to open directory %s: %w", quotePath(dir), err)
	}
	defer root.Close()
	for _, p := range t.paths {
		if _, big := t.oversized[p]; big || isLink(t.links, p) {
			continue
		}
		if err := writeFile(root, p, t.files[p]); err != nil {
			return fmt.Errorf("failed to write %s: %w", quotePath(p), err)
		}
	}
	return nil
}

func writeFile(root *os.Root, p string, data []byte) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if d := path.Dir(p); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := root.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	return root.Chmod(p, 0o644)
}

func isLink(links map[string]string, p string) bool {
	_, ok := links[p]
	return ok
}

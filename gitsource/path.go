package gitsource

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxPathBytes bounds the length of a path in a tree.
const maxPathBytes = 4096

// checkPath validates a slash-separated path relative to a tree root: valid
// UTF-8 without control characters, no empty, "." or ".." element, no leading
// or trailing slash, no backslash and no element Git would take for ".git".
func checkPath(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty path", ErrUnsafePath)
	}
	if len(p) > maxPathBytes {
		return fmt.Errorf("%w: path longer than %d bytes", ErrTooLarge, maxPathBytes)
	}
	for _, elem := range splitPath(p) {
		if err := checkName(elem); err != nil {
			return err
		}
	}
	return nil
}

// checkName validates one path element (a Git tree entry name).
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty path element (absolute path or '//')", ErrUnsafePath)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q element", ErrUnsafePath, name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("%w: slash or backslash in a name", ErrUnsafePath)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: invalid UTF-8", ErrUnsafePath)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: control character", ErrUnsafePath)
	case isDotGit(name):
		return fmt.Errorf("%w: .git element", ErrUnsafePath)
	}
	return nil
}

// isDotGit reports whether a file system might resolve name to ".git": any
// case, trailing dots and spaces (Windows), code points HFS+ ignores, and the
// NTFS short name "git~1" — the spellings Git's verify_path refuses.
func isDotGit(name string) bool {
	folded := strings.ToLower(strings.Map(dropIgnorable, name))
	folded = strings.TrimRight(folded, ". ")
	return folded == ".git" || folded == "git~1"
}

// dropIgnorable removes the code points HFS+ ignores when comparing names.
func dropIgnorable(r rune) rune {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e,
		r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return -1
	}
	return r
}

// quotePath quotes a path for an error message, bounded in length.
func quotePath(p string) string {
	return fmt.Sprintf("%q", shortPath(p))
}

func shortPath(p string) string {
	if len(p) > 256 {
		return p[:256] + "..."
	}
	return p
}

func splitPath(p string) []string { return strings.Split(p, "/") }

// Package revert computes the change to a platform repository that puts one
// instance's declaration back as it was at an earlier revision: what `cairn
// rollback --open-pr` proposes, so that Git says again what the cluster runs.
package revert

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/render/declarations"
)

// Revert is the change, and what it leaves alone.
type Revert struct {
	Files []forge.FileChange
	// Notes say what the change does not revert, and why (a module other
	// instances use).
	Notes []string
}

// Options say where the declarations are.
type Options struct {
	// Path is the directory of the repository holding the declarations (cairn
	// sync's --path), "." when empty.
	Path string
	// CairnNamespace is cairn's own namespace (see declarations.Options).
	CairnNamespace string
}

// Instance is the change that puts the declaration of namespace/name in head back
// as it was in held: its document, replaced in place in the file head declares it
// in (added back when head no longer declares it), and the files of its local
// module (a local, kustomize or Timoni path) when they changed and no other
// instance of head uses that module. It is an error when nothing differs.
func Instance(held, head *gitsource.Tree, opts Options, namespace, name string) (*Revert, error) {
	root := opts.Path
	if root == "" {
		root = "."
	}
	heldSet, heldRoot, err := load(held, root, opts.CairnNamespace)
	if err != nil {
		return nil, fmt.Errorf("failed to read the declarations of the held revision: %w", err)
	}
	headSet, headRoot, err := load(head, root, opts.CairnNamespace)
	if err != nil {
		return nil, fmt.Errorf("failed to read the declarations of the branch head: %w", err)
	}
	key := declarations.Key("ModuleInstance", namespace, name)
	was, ok := heldSet.Origins[key]
	mi := heldSet.Instance(namespace, name)
	if !ok || mi == nil {
		return nil, fmt.Errorf("the held revision declares no valid ModuleInstance %s/%s", namespace, name)
	}
	wasContent, _ := heldRoot.Bytes(was.File)
	wasAt := documentAt(wasContent, was.Line)
	if wasAt[2] != 0 {
		return nil, fmt.Errorf("%s: the document of %s/%s starts on its --- line: revert it by hand", was.File, namespace, name)
	}
	doc := slices.Clone(wasContent[wasAt[0]:wasAt[1]])
	if len(doc) > 0 && doc[len(doc)-1] != '\n' { // the file's last document: a separator may follow it now
		doc = append(doc, '\n')
	}
	r := &Revert{}
	if is, ok := headSet.Origins[key]; ok {
		content, _ := headRoot.Bytes(is.File)
		at := documentAt(content, is.Line)
		if at[2] != 0 {
			return nil, fmt.Errorf("%s: the document of %s/%s starts on its --- line: revert it by hand", is.File, namespace, name)
		}
		if !bytes.Equal(content[at[0]:at[1]], doc) {
			next := slices.Concat(content[:at[0]], doc, content[at[1]:])
			r.Files = append(r.Files, forge.FileChange{Path: path.Join(root, is.File), Content: next, Existed: true, Before: content})
		}
	} else if content, ok := headRoot.Bytes(was.File); ok { // no longer declared: added back where it was
		next := slices.Concat(bytes.TrimRight(content, "\n"), []byte("\n---\n"), doc)
		r.Files = append(r.Files, forge.FileChange{Path: path.Join(root, was.File), Content: next, Existed: true, Before: content})
	} else {
		r.Files = append(r.Files, forge.FileChange{Path: path.Join(root, was.File), Content: doc})
	}
	dir, atRepoRoot := localModule(mi)
	from, to, prefix := heldRoot, headRoot, root
	if atRepoRoot { // a kustomize path is relative to the repository's root
		from, to, prefix = held, head, "."
	}
	if dir != "" && from.DigestDir(dir) != to.DigestDir(dir) {
		if users := usersOf(headSet, dir, namespace, name); len(users) > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("its module %s changed since, but %s use it too: it is not reverted here",
				path.Join(prefix, dir), strings.Join(users, ", ")))
		} else {
			r.Files = append(r.Files, moduleFiles(from, to, prefix, dir)...)
		}
	}
	if len(r.Files) == 0 {
		return nil, fmt.Errorf("the branch head declares %s/%s as the held revision does: there is nothing to revert", namespace, name)
	}
	return r, nil
}

func load(t *gitsource.Tree, root, cairnNamespace string) (*declarations.Set, *gitsource.Tree, error) {
	sub, err := t.Sub(root)
	if err != nil {
		return nil, nil, err
	}
	set, err := declarations.Load(sub, declarations.Options{Root: root, CairnNamespace: cairnNamespace})
	if set == nil {
		return nil, nil, err
	}
	return set, sub, nil // a repository with invalid documents still has its origins
}

// separator is a YAML document separator line; bare is one with nothing after the
// "---" but a comment.
var (
	separator = regexp.MustCompile(`^---(\s|$)`)
	bare      = regexp.MustCompile(`^---\s*(#.*)?\r?\n?$`)
)

// documentAt is the byte range of the YAML document of content holding line
// (1-based): from after the last separator at or before it to the next separator;
// its third value is 1 when that separator line holds some of the document
// ("--- {a: 1}"), which a range of whole lines cannot replace.
func documentAt(content []byte, line int) [3]int {
	start, end, inline := 0, len(content), 0
	offset := 0
	for n, l := range bytes.SplitAfter(content, []byte("\n")) {
		if separator.Match(l) {
			switch {
			case n+1 <= line:
				start, inline = offset+len(l), 0
				if !bare.Match(l) {
					inline = 1
				}
			case end == len(content):
				end = offset
			}
		}
		offset += len(l)
	}
	return [3]int{start, end, inline}
}

// localModule is the directory of mi's module, relative to the declarations or,
// for a kustomize directory, to the repository's root; "" when it comes from a
// registry.
func localModule(mi *cairnv1.ModuleInstance) (dir string, atRepoRoot bool) {
	m := mi.Spec.Module
	switch {
	case m.Local != nil:
		return path.Clean(m.Local.Path), false
	case m.Kustomize != nil:
		return path.Clean(m.Kustomize.Path), true
	case m.Timoni != nil && m.Timoni.Path != "":
		return path.Clean(m.Timoni.Path), false
	}
	return "", false
}

// usersOf lists the other instances of set whose module is dir.
func usersOf(set *declarations.Set, dir, namespace, name string) []string {
	var users []string
	for _, mi := range set.Instances {
		if d, _ := localModule(mi); d == dir && (mi.Namespace != namespace || mi.Name != name) {
			users = append(users, mi.Namespace+"/"+mi.Name)
		}
	}
	return users
}

// moduleFiles puts the files under dir of head back as held has them.
func moduleFiles(held, head *gitsource.Tree, root, dir string) []forge.FileChange {
	var out []forge.FileChange
	under := func(t *gitsource.Tree) []string {
		var files []string
		for _, f := range t.Files() {
			if dir == "." || strings.HasPrefix(f, dir+"/") {
				files = append(files, f)
			}
		}
		return files
	}
	for _, f := range under(held) {
		was, _ := held.Bytes(f)
		is, ok := head.Bytes(f)
		if !ok || !bytes.Equal(was, is) {
			out = append(out, forge.FileChange{Path: path.Join(root, f), Content: was, Existed: ok, Before: is})
		}
	}
	for _, f := range under(head) {
		if _, ok := held.Bytes(f); !ok {
			is, _ := head.Bytes(f)
			out = append(out, forge.FileChange{Path: path.Join(root, f), Delete: true, Existed: true, Before: is})
		}
	}
	return out
}

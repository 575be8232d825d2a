package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// maxLinkHops bounds the symbolic links followed to resolve one module file: the
// links of a chain, of the directories of a target, and those nested in linked
// directories. More is a loop, or as good as one.
const maxLinkHops = 40

// moduleLister lists the files of a module directory, following the symbolic
// links that stay inside the tree it reads (the repository, or the directory
// cairn syncs) and, with tenants, inside the paths of the tenant owning the link:
// Timoni modules keep cue.mod/pkg as a link to schemas elsewhere in their
// repository. A link that leaves the tree (absolute, or climbing above its root),
// a loop, a dangling link and a link into another tenant's paths are refused,
// naming the link.
type moduleLister struct {
	fsys    fs.FS
	display string
	// owner names the tenant that owns a path of fsys ("" for the platform team);
	// nil when there are no tenants.
	owner func(string) string
	names []string
	// paths maps each listed name (relative to the module) to its file in fsys,
	// which differs from dir/name below a followed link.
	paths map[string]string
	// via are the links followed to reach the directory being walked, and walking
	// the directories being walked (the module's first).
	via     []linkRef
	walking []string
	hops    int
	// targets are the paths of fsys the followed links lead to.
	targets []string
}

// LinkedPaths returns the paths of fsys (files and directories) that the
// symbolic links of the module directory dir lead to, resolved and followed
// transitively, or the error a render of it would be refused with. A change
// below any of them changes what the render reads.
func LinkedPaths(fsys fs.FS, dir string, tenants []TenantPaths) ([]string, error) {
	dir, err := cleanLocalPath(dir)
	if err != nil {
		return nil, err
	}
	l := &moduleLister{fsys: fsys, owner: ownerOf(tenants), paths: map[string]string{}}
	if err := l.walk(dir, ""); err != nil {
		return nil, err
	}
	slices.Sort(l.targets)
	return slices.Compact(l.targets), nil
}

// linkRef is a followed link: its path in fsys and its name in errors.
type linkRef struct{ path, name string }

// walk lists the files below the directory real of fsys as the names below rel
// ("" for the module root).
func (l *moduleLister) walk(real, rel string) error {
	l.walking = append(l.walking, real)
	defer func() { l.walking = l.walking[:len(l.walking)-1] }()
	return fs.WalkDir(l.fsys, real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := path.Join(rel, relPath(real, p))
		if name == "." {
			name = ""
		}
		if skip, err := skipEntry(l.fsys, p, name, d); skip || err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return l.link(p, name)
		}
		if err := irregular(d, l.display+name); err != nil {
			return err
		}
		return l.add(name, p)
	})
}

// add lists the file p of fsys as name.
func (l *moduleLister) add(name, p string) error {
	if len(l.names) >= maxModuleFiles {
		return newError(ReasonLimitExceeded, "module %q is too large: more than %d files", strings.TrimSuffix(l.display, "/"), maxModuleFiles)
	}
	for _, link := range l.via {
		if err := l.sameOwner(link, p); err != nil {
			return err
		}
	}
	l.names = append(l.names, name)
	l.paths[name] = p
	return nil
}

// link follows the symbolic link p of fsys, listed as name: a file is listed
// under the link's name, a directory walked below it.
func (l *moduleLister) link(p, name string) error {
	l.hops = 0
	target, err := l.resolve(p, l.display+name)
	if err != nil {
		return err
	}
	info, err := fs.Stat(l.fsys, target)
	if err != nil {
		return linkError(l.display+name, "its target %s does not exist", target)
	}
	l.targets = append(l.targets, target)
	l.via = append(l.via, linkRef{path: p, name: l.display + name})
	defer func() { l.via = l.via[:len(l.via)-1] }()
	if !info.IsDir() {
		return l.add(name, target)
	}
	for _, dir := range l.walking {
		if within(dir, target) {
			return linkError(l.display+name, "it leads to %s, a directory that holds it (a loop)", displayDir(target))
		}
	}
	if len(l.via) > maxLinkHops {
		return linkError(l.display+name, "more than %d symbolic links are nested (a loop?)", maxLinkHops)
	}
	return l.walk(target, name)
}

// resolve returns the path in fsys that the link p leads to, following chains
// and the links among the directories of each target.
func (l *moduleLister) resolve(p, display string) (string, error) {
	if l.hops++; l.hops > maxLinkHops {
		return "", linkError(display, "more than %d symbolic links are followed to resolve it (a loop?)", maxLinkHops)
	}
	target, err := fs.ReadLink(l.fsys, p)
	if err != nil {
		return "", linkError(display, "its target cannot be read: %v", err)
	}
	if path.IsAbs(target) || strings.Contains(target, `\`) {
		return "", linkError(display, "its target %q is an absolute path: a link must stay inside the repository", target)
	}
	joined := path.Join(path.Dir(p), target)
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return "", linkError(display, "its target %q leaves the repository", target)
	}
	return l.resolvePath(joined, display)
}

// resolvePath resolves the links among the elements of p, a clean path of fsys.
func (l *moduleLister) resolvePath(p, display string) (string, error) {
	cur := "."
	for _, elem := range strings.Split(p, "/") {
		next := path.Join(cur, elem)
		info, err := fs.Lstat(l.fsys, next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", linkError(display, "its target %s does not exist", p)
			}
			return "", linkError(display, "its target cannot be read: %v", err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			if next, err = l.resolve(next, display); err != nil {
				return "", err
			}
		}
		cur = next
	}
	return cur, nil
}

// sameOwner refuses a file that a link leads to when the file is owned by
// another than the link (a tenant's link reads its tenant's files, the platform
// team's link no tenant's).
func (l *moduleLister) sameOwner(link linkRef, file string) error {
	if l.owner == nil {
		return nil
	}
	from, to := l.owner(link.path), l.owner(file)
	if from == to {
		return nil
	}
	return linkError(link.name, "it leads to %s, which belongs to %s, not to %s, which owns the link", file, ownerName(to), ownerName(from))
}

func ownerName(tenant string) string {
	if tenant == "" {
		return "the platform team"
	}
	return "tenant " + tenant
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

func displayDir(dir string) string {
	if dir == "." {
		return "the repository root"
	}
	return dir
}

func linkError(name, format string, args ...any) error {
	return &Error{Reason: ReasonUnsafeModule, File: name,
		Err: fmt.Errorf("symbolic link not followed: "+format, args...)}
}

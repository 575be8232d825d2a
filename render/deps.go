package render

import (
	"context"
	"fmt"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"
)

// depSet is every dependency of the main module, fetched before evaluation:
// their files go into the loader's file system under deps/<module>@<version>/
// and evaluation itself never touches the network or the disk.
type depSet struct {
	files    map[string][]byte // "deps/<module>@<version>/<file>"
	modFiles map[module.Version]*modfile.File
	cache    *moduleCache // for module files of versions the main module does not list
	pins     *pinner
	ctx      context.Context
	// lookup returns the pinned module file of a version the main module
	// does not list; nil means the cache (in a worker: the parent).
	lookup func(module.Version) (*modfile.File, error)
}

// fetchDeps fetches the dependencies listed in the main module's (pinned)
// module file. CUE's module files list the full build list of a module, so
// these are all the modules evaluation can import.
func (r *Renderer) fetchDeps(ctx context.Context, req Request, mf *modfile.File, pins *pinner) (*depSet, error) {
	deps := &depSet{files: map[string][]byte{}, modFiles: map[module.Version]*modfile.File{}, pins: pins, ctx: ctx}
	if len(mf.Deps) == 0 {
		return deps, nil
	}
	if len(mf.Deps) > maxDependencies {
		return nil, newError(ReasonLimitExceeded, "module %s has %d dependencies, more than %d", mf.QualifiedModule(), len(mf.Deps), maxDependencies)
	}
	mc, err := r.cacheFor(req, "dependency "+firstDep(mf))
	if err != nil {
		return nil, err
	}
	deps.cache = mc
	for _, mpath := range sortedKeys(mf.Deps) {
		if err := deps.add(ctx, mc, pins, mpath, mf.Deps[mpath]); err != nil {
			return nil, err
		}
	}
	return deps, nil
}

func firstDep(mf *modfile.File) string {
	keys := sortedKeys(mf.Deps)
	return keys[0] + " " + mf.Deps[keys[0]].Version
}

func (d *depSet) add(ctx context.Context, mc *moduleCache, pins *pinner, mpath string, dep *modfile.Dep) error {
	if dep.ReplaceWith != "" {
		return newError(ReasonUnsafeModule, "dependency %s is replaced with %q: replacements are not supported", mpath, dep.ReplaceWith)
	}
	mv, err := moduleVersion(mpath, dep.Version)
	if err != nil {
		return err
	}
	mf, err := mc.modFile(ctx, mv)
	if err != nil {
		return err
	}
	if d.modFiles[mv], err = pins.apply(mf, mv.String()); err != nil {
		return err
	}
	files, _, err := mc.fetch(ctx, mv)
	if err != nil {
		return err
	}
	for name, data := range files {
		d.files[depDir(mv)+"/"+name] = data
	}
	return nil
}

// newDepSet is an empty set of dependencies, with no registry behind it.
func newDepSet() *depSet {
	return &depSet{files: map[string][]byte{}, modFiles: map[module.Version]*modfile.File{}, pins: newPinner(nil, "")}
}

func depDir(mv module.Version) string { return "deps/" + mv.String() }

// loadRegistry is the registry the CUE loader sees: it serves the fetched
// dependencies from the loader's in-memory file system and nothing else.
type loadRegistry struct {
	deps *depSet
	fsys *memFS
}

// ModFile implements modconfig.Registry. Module files of versions that the
// main module does not list (a dependency of a dependency, superseded in the
// build list) are read through the cache, pinned like the others.
func (l *loadRegistry) ModFile(_ context.Context, mv module.Version) (*modfile.File, error) {
	if mf, ok := l.deps.modFiles[mv]; ok {
		return mf, nil
	}
	if l.deps.lookup != nil {
		return l.deps.lookup(mv)
	}
	mf, err := l.deps.unlisted(mv)
	if err != nil {
		return nil, err
	}
	return l.deps.pins.apply(mf, mv.String())
}

// unlisted reads the module file of a version the main module does not list
// through the cache, as the registry has it (not pinned).
func (d *depSet) unlisted(mv module.Version) (*modfile.File, error) {
	if d.cache == nil {
		return nil, fmt.Errorf("module %s is not a dependency of the module and no registry is configured", mv)
	}
	return d.cache.modFile(d.ctx, mv)
}

// Fetch implements modconfig.Registry.
func (l *loadRegistry) Fetch(_ context.Context, mv module.Version) (module.SourceLoc, error) {
	if _, ok := l.deps.modFiles[mv]; !ok {
		return module.SourceLoc{}, fmt.Errorf("module %s is not listed in the deps of cue.mod/module.cue (run cue mod tidy)", mv)
	}
	sub, err := newSubFS(l.fsys, "/"+depDir(mv))
	if err != nil {
		return module.SourceLoc{}, err
	}
	return module.SourceLoc{FS: sub, Dir: "."}, nil
}

// FetchFromCache implements modconfig.CachedRegistry.
func (l *loadRegistry) FetchFromCache(mv module.Version) (module.SourceLoc, error) {
	return l.Fetch(context.Background(), mv)
}

// ModuleVersions implements modconfig.Registry: cairn never picks versions.
func (l *loadRegistry) ModuleVersions(context.Context, string) ([]string, error) {
	return nil, fmt.Errorf("module versions are not resolved at render time: list every dependency in cue.mod/module.cue")
}

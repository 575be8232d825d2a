package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/mod/modfile"
	"golang.org/x/mod/semver"
)

// pinner rewrites the catalog dependencies of module files to the pinned
// versions and records skew: a module that requires a newer catalog than the
// pinned one is refused under SkewRefuse, and rendered with the pinned
// version and a warning under SkewWarn. It is used for the main module and for
// the module file of every dependency, so that no dependency can pull in
// another catalog version either.
type pinner struct {
	pins   map[string]string // "example.com/catalog@v0" -> "v0.3.1"
	refuse bool

	mu    sync.Mutex
	warns map[string]bool
}

func newPinner(catalogs []Catalog, policy string) *pinner {
	p := &pinner{pins: map[string]string{}, refuse: policy == SkewRefuse, warns: map[string]bool{}}
	for _, c := range catalogs {
		p.pins[qualify(c.Module, c.Version)] = c.Version
	}
	return p
}

// qualify adds the major version suffix when a catalog module path lacks it.
func qualify(mpath, version string) string {
	if strings.Contains(mpath, "@") {
		return mpath
	}
	return mpath + "@" + semver.Major(version)
}

// apply returns a copy of mf whose dependencies on catalogs are at the pinned
// versions. requirer names the module in messages.
func (p *pinner) apply(mf *modfile.File, requirer string) (*modfile.File, error) {
	out := *mf
	out.Deps = maps.Clone(mf.Deps)
	for _, mpath := range sortedKeys(out.Deps) {
		pinned, ok := p.pins[mpath]
		if !ok {
			continue
		}
		if err := p.check(requirer, mpath, out.Deps[mpath].Version, pinned); err != nil {
			return nil, err
		}
		dep := *out.Deps[mpath]
		dep.Version = pinned
		out.Deps[mpath] = &dep
	}
	return &out, nil
}

// addAll makes every catalog a dependency of mf (used for the synthetic
// module file of a local module that has none).
func (p *pinner) addAll(mf *modfile.File) {
	if len(p.pins) > 0 && mf.Deps == nil {
		mf.Deps = map[string]*modfile.Dep{}
	}
	for mpath, v := range p.pins {
		mf.Deps[mpath] = &modfile.Dep{Version: v}
	}
}

func (p *pinner) check(requirer, mpath, required, pinned string) error {
	if !semver.IsValid(pinned) {
		return newError(ReasonCatalogSkew, "catalog %s is pinned to %q, which is not a semantic version", mpath, pinned)
	}
	if semver.Compare(required, pinned) <= 0 {
		return nil
	}
	msg := fmt.Sprintf("module %s requires catalog %s %s, newer than the pinned %s", requirer, mpath, required, pinned)
	if p.refuse {
		return newError(ReasonCatalogSkew, "%s", msg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warns[msg+"; rendering with "+pinned] = true
	return nil
}

func (p *pinner) warnings() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.warns))
}

// pin rewrites the module's cue.mod/module.cue with the pinned catalogs. A
// local module without a module file gets every catalog as a dependency.
func (s *moduleSource) pin(p *pinner) error {
	mf, err := p.apply(s.modFile, s.name)
	if err != nil {
		return err
	}
	if _, ok := s.files[modFilePath]; !ok {
		p.addAll(mf)
	}
	data, err := modfile.Format(mf)
	if err != nil {
		return newError(ReasonRenderFailed, "failed to write the module file of %s: %w", s.name, err)
	}
	s.files[modFilePath] = data
	s.modFile, err = parseModFile(data, s.display+modFilePath)
	return err
}

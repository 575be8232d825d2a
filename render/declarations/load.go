package declarations

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// entry is one decoded declaration and the problems found with it.
type entry struct {
	doc       *document
	obj       metav1.Object
	errs      []*Error
	duplicate bool
	// refused is a Platform or Registry document declared where it may not be.
	refused bool
	// owner is the tenant whose paths hold the document, nil for the platform team's.
	owner *cairnv1.Tenant
}

func (e *entry) valid() bool { return e.obj != nil && len(e.errs) == 0 }

// loader holds the state of one Load.
type loader struct {
	fsys    fs.FS
	opts    Options
	set     *Set
	invalid []*Error
	// files are the files read in the first pass; deferred those too large for it.
	files, deferred []*file
	// refusedPlatforms are the Platform documents refused under a tenant's paths.
	refusedPlatforms []*Error
	platforms        []*entry
	registries       map[string]*entry
	instances        map[string]*entry
	// declared lists the instance entries in the order they were read, first copies only.
	declared []*entry
}

// Load reads the declarations under opts.Path of fsys, whose root is the root of the
// repository. The error reports repository-level problems only: no Platform
// (ReasonMissingPlatform), more than one (ReasonDuplicatePlatform), an invalid Platform or
// one that names an undeclared Registry, too many documents, or a bad opts.Path. It is an
// *Error, or several joined (errors.As finds the first). With an error the Set is still
// returned for reporting, with a nil Platform, no Instances, and the Invalid and Unparsed
// found so far; it must not be applied. Problems of single documents or instances are
// listed in Set.Invalid and do not fail Load.
func Load(fsys fs.FS, opts Options) (*Set, error) {
	l := &loader{
		fsys:       fsys,
		opts:       opts.withDefaults(),
		set:        &Set{Origins: map[string]Origin{}},
		registries: map[string]*entry{},
		instances:  map[string]*entry{},
	}
	if err := l.readTree(); err != nil {
		return l.finish(false), err
	}
	l.admitFiles()
	l.validateRegistries()
	platform, err := l.platform()
	if err != nil {
		return l.finish(false), err
	}
	l.validateInstances(platform)
	l.checkCycles()
	l.set.Platform = platform
	return l.finish(true), nil
}

// add records a decoded document, reporting duplicates. Of two Registries the first is
// kept; of two instances neither is, since either may be the one meant.
func (l *loader) add(e *entry) {
	d := e.doc
	if _, ok := l.set.Origins[d.key()]; !ok {
		l.set.Origins[d.key()] = Origin{File: d.file, Line: d.line}
	}
	switch d.kind {
	case cairnv1.PlatformKind:
		l.platforms = append(l.platforms, e)
	case cairnv1.RegistryKind:
		l.addRegistry(e)
	default:
		l.addInstance(e)
	}
}

func (l *loader) addRegistry(e *entry) {
	if first, ok := l.registries[e.doc.name]; ok {
		l.invalid = append(l.invalid, duplicateError(e.doc, first.doc))
		return
	}
	l.registries[e.doc.name] = e
}

func (l *loader) addInstance(e *entry) {
	id := e.doc.object()
	first, ok := l.instances[id]
	switch {
	case !ok:
		l.instances[id] = e
		l.declared = append(l.declared, e)
		return
	case first.owner == nil && e.owner != nil:
		l.invalid = append(l.invalid, shadowed(e, first))
		return
	case first.owner != nil && e.owner == nil:
		l.preferPlatform(first, e)
		return
	}
	if !first.duplicate {
		first.duplicate = true
		first.errs = append(first.errs, duplicateError(first.doc, e.doc))
	}
	l.invalid = append(l.invalid, duplicateError(e.doc, first.doc))
}

// preferPlatform puts platform, an instance of the platform team's files, in the place
// of tenant's declaration of the same instance, which is refused.
func (l *loader) preferPlatform(tenant, platform *entry) {
	id := platform.doc.object()
	l.instances[id] = platform
	l.declared[slices.Index(l.declared, tenant)] = platform
	l.set.Origins[platform.doc.key()] = Origin{File: platform.doc.file, Line: platform.doc.line}
	l.invalid = append(l.invalid, shadowed(tenant, platform))
}

// shadowed refuses a tenant's declaration of an instance the platform team's files
// declare: platform files win. Like a declaration in a foreign namespace it is left out
// entirely, so that the platform's instance is neither failed nor a duplicate.
func shadowed(tenant, platform *entry) *Error {
	e := tenant.doc.errorAt(problem{ReasonDuplicateDeclaration, "metadata.name",
		fmt.Sprintf("tenant %s: ModuleInstance %s is declared by the platform team at %s, whose files win (this declaration is refused)",
			tenant.owner.Name, tenant.doc.object(), at(platform.doc.file, platform.doc.line))})
	e.Kind, e.Object = "", ""
	return e
}

func duplicateError(d, other *document) *Error {
	return d.errorAt(problem{ReasonDuplicateDeclaration, "",
		fmt.Sprintf("declared more than once: at %s and at %s", at(d.file, d.line), at(other.file, other.line))})
}

// platform returns the one valid Platform, or the fatal error that there is none. It is
// checked against the declared Registries, so they must be validated first.
func (l *loader) platform() (*cairnv1.Platform, error) {
	switch {
	case len(l.platforms) == 0 && len(l.refusedPlatforms) > 0:
		return nil, joinErrors(slices.Clone(l.refusedPlatforms))
	case len(l.platforms) == 0:
		return nil, l.missingPlatform()
	case len(l.platforms) > 1:
		first, second := l.platforms[0].doc, l.platforms[1].doc
		return nil, second.errorAt(problem{ReasonDuplicatePlatform, "",
			fmt.Sprintf("a repository has exactly one Platform: declared at %s and at %s", at(first.file, first.line), at(second.file, second.line))})
	}
	p := l.platforms[0]
	if p.obj == nil {
		return nil, joinErrors(p.errs)
	}
	platform := p.obj.(*cairnv1.Platform)
	errs := append(p.errs, p.doc.errorsAt(validatePlatform(platform, l.registryState, l.opts.CairnNamespace))...)
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return platform, nil
}

func (l *loader) missingPlatform() error {
	e := &Error{Reason: ReasonMissingPlatform, File: l.opts.Path, Message: "no Platform is declared"}
	if len(l.set.Unparsed) > 0 {
		e.Message += " (files that could not be read: " + strings.Join(l.set.Unparsed, ", ") + ")"
	}
	return e
}

// registryState reports whether Registry name is declared, and whether it is valid.
func (l *loader) registryState(name string) (declared, valid bool) {
	e, ok := l.registries[name]
	return ok, ok && e.valid()
}

func (l *loader) validateRegistries() {
	for _, e := range l.registries {
		if e.obj != nil {
			e.errs = append(e.errs, e.doc.errorsAt(validateRegistry(e.obj.(*cairnv1.Registry)))...)
		}
	}
}

func (l *loader) validateInstances(p *cairnv1.Platform) {
	for _, e := range l.declared {
		ctx := instanceContext{platform: p, tenant: e.owner, declared: l.mayBeDeclared, root: l.opts.Root, cairnNS: l.opts.CairnNamespace}
		if e.obj != nil {
			e.errs = append(e.errs, e.doc.errorsAt(ctx.validate(e.obj.(*cairnv1.ModuleInstance)))...)
		}
	}
}

// mayBeDeclared reports whether instance id is declared, or may be, in a file that could
// not be read: a dependency there is not dangling, its dependents wait for it.
func (l *loader) mayBeDeclared(id string) bool {
	return l.instances[id] != nil || len(l.set.Unparsed) > 0
}

func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	sort.SliceStable(errs, func(i, j int) bool { return lessError(errs[i], errs[j]) })
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// finish fills the Set: problems sorted by place, valid Registries, and, when the
// repository is usable, the valid instances in dependency order.
func (l *loader) finish(usable bool) *Set {
	s := l.set
	s.Invalid = append(s.Invalid, l.invalid...)
	for _, e := range l.registries {
		s.Invalid = append(s.Invalid, e.errs...)
	}
	for _, e := range l.declared {
		s.Invalid = append(s.Invalid, e.errs...)
	}
	sort.SliceStable(s.Invalid, func(i, j int) bool { return lessError(s.Invalid[i], s.Invalid[j]) })
	sort.Strings(s.Unparsed)
	s.Unparsed = slices.Compact(s.Unparsed)
	l.fillRegistries()
	if usable {
		l.fillInstances()
	}
	return s
}

func lessError(a, b *Error) bool {
	if a.File != b.File {
		return a.File < b.File
	}
	return a.Line < b.Line
}

func (l *loader) fillRegistries() {
	s := l.set
	s.registries = map[string]*cairnv1.Registry{}
	for name, e := range l.registries {
		if e.valid() {
			s.registries[name] = e.obj.(*cairnv1.Registry)
			s.Registries = append(s.Registries, s.registries[name])
		}
	}
	sort.Slice(s.Registries, func(i, j int) bool { return s.Registries[i].Name < s.Registries[j].Name })
}

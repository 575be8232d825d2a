package declarations

import (
	"fmt"

	"github.com/bmatcuk/doublestar/v4"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// admitFiles decides, once every file is read, which documents the repository holds:
// it picks the Platform, then admits each file under the tenant owning it and the caps
// that apply to it, and reads the files deferred for their size.
func (l *loader) admitFiles() {
	spec := l.choosePlatform()
	for _, f := range l.files {
		l.admit(spec, f)
	}
	for _, f := range l.deferred {
		l.admitDeferred(spec, f)
	}
}

// choosePlatform refuses every Platform document under a tenant's paths (those of the
// trusted Platform, else of any decoded Platform document, its own included), so that a tenant can neither replace
// nor shadow the Platform, and returns the spec of the one document left: its tenants
// and limits bound every file. When none or several are left, the spec is empty (the
// default limits, no tenants) and platform reports the error.
func (l *loader) choosePlatform() *cairnv1.PlatformSpec {
	var candidates, left []*entry
	for _, f := range l.files {
		for _, e := range f.entries {
			if e.doc.kind == cairnv1.PlatformKind {
				candidates = append(candidates, e)
			}
		}
	}
	for _, c := range candidates {
		if t := l.claimedBy(candidates, c.doc.file); t != nil {
			l.refuse(c, t)
			l.refusedPlatforms = append(l.refusedPlatforms, l.invalid[len(l.invalid)-1])
			continue
		}
		left = append(left, c)
	}
	if len(left) == 1 && left[0].obj != nil {
		return &left[0].obj.(*cairnv1.Platform).Spec
	}
	return &cairnv1.PlatformSpec{}
}

// claimedBy returns a tenant whose paths match file: of the trusted Platform when the
// options give one, else of any of the Platform documents.
func (l *loader) claimedBy(platforms []*entry, file string) *cairnv1.Tenant {
	if l.opts.Trusted != nil {
		if t := tenantsOf(l.opts.Trusted, file); len(t) > 0 {
			return t[0]
		}
		return nil
	}
	for _, p := range platforms {
		if p.obj == nil {
			continue
		}
		if t := tenantsOf(&p.obj.(*cairnv1.Platform).Spec, file); len(t) > 0 {
			return t[0]
		}
	}
	return nil
}

// tenantsOf returns the tenants whose paths match file.
func tenantsOf(spec *cairnv1.PlatformSpec, file string) []*cairnv1.Tenant {
	var out []*cairnv1.Tenant
	for i := range spec.Tenants {
		t := &spec.Tenants[i]
		for _, p := range t.Paths {
			if ok, err := doublestar.Match(p, file); err == nil && ok {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// refuse leaves out a Platform or Registry document declared under tenant t's paths.
func (l *loader) refuse(e *entry, t *cairnv1.Tenant) {
	e.refused = true
	l.invalid = append(l.invalid, e.doc.errorAt(problem{ReasonTenantViolation, "",
		fmt.Sprintf("tenant %s: a %s may not be declared under the tenant's paths %q", t.Name, e.doc.kind, t.Paths)}))
}

// foreignNamespace refuses an instance declared under tenant t's paths in a namespace
// that is not t's. The instance is left out entirely, as if it were not declared: it may
// name another's instance, which must neither be marked failed nor become a duplicate.
func foreignNamespace(d *document, t *cairnv1.Tenant) *Error {
	e := d.errorAt(problem{ReasonNamespaceDenied, "metadata.namespace",
		fmt.Sprintf("tenant %s: namespace %q is not one of %v (ModuleInstance %s is refused)", t.Name, d.namespace, t.Namespaces, d.object())})
	e.Kind, e.Object = "", ""
	return e
}

// OwnerOf returns the tenant of spec whose paths hold file, a path relative to the
// tree Load reads; nil when no tenant's paths do (the platform team's file) or when two
// tenants claim it (such a file is never read).
func OwnerOf(spec *cairnv1.PlatformSpec, file string) *cairnv1.Tenant {
	t, _ := owner(spec, file)
	return t
}

// owner returns the tenant owning file (nil: the platform team), or the error that two
// tenants claim it.
func owner(spec *cairnv1.PlatformSpec, file string) (*cairnv1.Tenant, *Error) {
	ts := tenantsOf(spec, file)
	switch len(ts) {
	case 0:
		return nil, nil
	case 1:
		return ts[0], nil
	}
	return nil, &Error{Reason: ReasonTenantViolation, File: file,
		Message: fmt.Sprintf("file belongs to more than one tenant: %s (paths %q) and %s (paths %q)", ts[0].Name, ts[0].Paths, ts[1].Name, ts[1].Paths)}
}

// admit records the documents of f unless f exceeds its caps or two tenants claim it,
// in which case the whole file is unparsed: the instances it declares are unknown.
func (l *loader) admit(spec *cairnv1.PlatformSpec, f *file) {
	t, _, docs, ok := l.ownerAndCaps(spec, f)
	switch {
	case !ok:
		return
	case f.docs > docs.n:
		l.unparsed(docs.exceeded(f.path, f.docLines[docs.n]))
		return
	}
	for _, e := range f.entries {
		switch {
		case e.refused:
		case t != nil && e.doc.kind != cairnv1.ModuleInstanceKind:
			l.refuse(e, t)
		case t != nil && !(cairnv1.NamespacePolicy{Allow: t.Namespaces}).Allows(e.doc.namespace):
			l.invalid = append(l.invalid, foreignNamespace(e.doc, t))
		default:
			e.owner = t
			l.add(e)
		}
	}
}

// admitDeferred reads a file larger than the default cap once its own cap is known.
// The Platform is chosen by then, so a Platform document in such a file is refused.
func (l *loader) admitDeferred(spec *cairnv1.PlatformSpec, f *file) {
	_, bytes, docs, ok := l.ownerAndCaps(spec, f)
	if !ok {
		return
	}
	data, rerr := l.readFile(f.path, bytes)
	if rerr != nil {
		l.unparsed(rerr)
		return
	}
	f.size = int64(len(data))
	if !l.parseFile(f, data, docs.n) {
		return
	}
	for _, e := range f.entries {
		if e.doc.kind == cairnv1.PlatformKind {
			e.refused = true
			l.invalid = append(l.invalid, e.doc.errorAt(problem{ReasonInvalidDeclaration, "",
				fmt.Sprintf("a Platform must be declared in a file of at most %d bytes", cairnv1.DefaultMaxFileBytes)}))
		}
	}
	l.admit(spec, f)
}

// ownerAndCaps returns the tenant owning f and its caps; ok is false, and f unparsed,
// when two tenants claim f or it is over its size cap.
func (l *loader) ownerAndCaps(spec *cairnv1.PlatformSpec, f *file) (*cairnv1.Tenant, byteCap, docCap, bool) {
	t, err := owner(spec, f.path)
	if err != nil {
		l.unparsed(err)
		return nil, byteCap{}, docCap{}, false
	}
	bytes, docs := l.fileCaps(spec, t)
	if f.size > bytes.n {
		l.unparsed(bytes.exceeded(f.path))
		return nil, byteCap{}, docCap{}, false
	}
	return t, bytes, docs, true
}

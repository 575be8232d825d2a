package v1alpha1

import (
	"path"
	"time"
)

// Allows reports whether objects may be put in namespace ns: it must match an allow
// pattern (when any are given) and no deny pattern. Patterns are path.Match globs.
func (p NamespacePolicy) Allows(ns string) bool {
	if MatchAnyPattern(p.Deny, ns) {
		return false
	}
	return len(p.Allow) == 0 || MatchAnyPattern(p.Allow, ns)
}

// MatchAnyPattern reports whether s matches one of the path.Match globs in patterns.
func MatchAnyPattern(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, s); err == nil && ok {
			return true
		}
	}
	return false
}

// Defaults of Limits.
const (
	DefaultMaxTimeout       = 30 * time.Minute
	DefaultRenderMemory     = 512 << 20
	DefaultMaxFileBytes     = 1 << 20
	DefaultMaxFileDocuments = 1000
	DefaultMaxModuleBytes   = 16 << 20
)

// EffectiveLimits are Limits with every default filled in.
type EffectiveLimits struct {
	MaxTimeout          time.Duration
	RenderMemory        int64
	MaxFileBytes        int64
	MaxFileDocuments    int
	MaxModuleBytes      int64
	AllowPruneProtected bool
	AllowEmpty          bool
}

// Effective returns the limits of the Platform's spec.limits for its own instances
// and files (tenant nil), or those of tenant: the tighter of the tenant's and the
// Platform's, field by field.
func (p *PlatformSpec) Effective(tenant *Tenant) EffectiveLimits {
	l := p.Limits.effective()
	if tenant == nil {
		return l
	}
	t := tenant.Limits.effective()
	return EffectiveLimits{
		MaxTimeout:          min(l.MaxTimeout, t.MaxTimeout),
		RenderMemory:        min(l.RenderMemory, t.RenderMemory),
		MaxFileBytes:        min(l.MaxFileBytes, t.MaxFileBytes),
		MaxFileDocuments:    min(l.MaxFileDocuments, t.MaxFileDocuments),
		MaxModuleBytes:      min(l.MaxModuleBytes, t.MaxModuleBytes),
		AllowPruneProtected: l.AllowPruneProtected && (tenant.Limits.AllowPruneProtected == nil || t.AllowPruneProtected),
		AllowEmpty:          l.AllowEmpty && (tenant.Limits.AllowEmpty == nil || t.AllowEmpty),
	}
}

func (l Limits) effective() EffectiveLimits {
	e := EffectiveLimits{
		MaxTimeout: DefaultMaxTimeout, RenderMemory: DefaultRenderMemory, MaxFileBytes: DefaultMaxFileBytes,
		MaxFileDocuments: DefaultMaxFileDocuments, MaxModuleBytes: DefaultMaxModuleBytes,
	}
	if l.MaxTimeout != nil && l.MaxTimeout.Duration > 0 {
		e.MaxTimeout = l.MaxTimeout.Duration
	}
	if l.RenderMemory != nil && l.RenderMemory.Value() > 0 {
		e.RenderMemory = l.RenderMemory.Value()
	}
	if l.MaxFileBytes != nil && l.MaxFileBytes.Value() > 0 {
		e.MaxFileBytes = l.MaxFileBytes.Value()
	}
	if l.MaxFileDocuments != nil && *l.MaxFileDocuments > 0 {
		e.MaxFileDocuments = int(*l.MaxFileDocuments)
	}
	if l.MaxModuleBytes != nil && l.MaxModuleBytes.Value() > 0 {
		e.MaxModuleBytes = l.MaxModuleBytes.Value()
	}
	e.AllowPruneProtected = l.AllowPruneProtected != nil && *l.AllowPruneProtected
	e.AllowEmpty = l.AllowEmpty != nil && *l.AllowEmpty
	return e
}

// Tenant returns the tenant named name, or nil.
func (p *PlatformSpec) Tenant(name string) *Tenant {
	for i := range p.Tenants {
		if p.Tenants[i].Name == name {
			return &p.Tenants[i]
		}
	}
	return nil
}

// MatchesGroupKind reports whether group/kind is in list ("*" matches any group or kind).
func MatchesGroupKind(list []GroupKind, group, kind string) bool {
	for _, gk := range list {
		if (gk.Group == "*" || gk.Group == group) && (gk.Kind == "*" || gk.Kind == kind) {
			return true
		}
	}
	return false
}

package v1alpha1

import (
	"path"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
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
// and files (tenant nil), or those of tenant: each field the tenant sets tightens the
// Platform's (the smaller cap, a grant only if both give it); a field it leaves unset
// is the Platform's.
func (p *PlatformSpec) Effective(tenant *Tenant) EffectiveLimits {
	e := p.Limits.effective()
	if tenant == nil {
		return e
	}
	t := tenant.Limits
	if t.MaxTimeout != nil && t.MaxTimeout.Duration > 0 {
		e.MaxTimeout = min(e.MaxTimeout, t.MaxTimeout.Duration)
	}
	e.RenderMemory = tighter(e.RenderMemory, t.RenderMemory)
	e.MaxFileBytes = tighter(e.MaxFileBytes, t.MaxFileBytes)
	e.MaxModuleBytes = tighter(e.MaxModuleBytes, t.MaxModuleBytes)
	if t.MaxFileDocuments != nil && *t.MaxFileDocuments > 0 {
		e.MaxFileDocuments = min(e.MaxFileDocuments, int(*t.MaxFileDocuments))
	}
	e.AllowPruneProtected = e.AllowPruneProtected && (t.AllowPruneProtected == nil || *t.AllowPruneProtected)
	e.AllowEmpty = e.AllowEmpty && (t.AllowEmpty == nil || *t.AllowEmpty)
	return e
}

// tighter is the smaller of limit and q, when q is set.
func tighter(limit int64, q *resource.Quantity) int64 { return min(limit, quantityOr(q, limit)) }

func (l Limits) effective() EffectiveLimits {
	e := EffectiveLimits{
		MaxTimeout: DefaultMaxTimeout, RenderMemory: quantityOr(l.RenderMemory, DefaultRenderMemory),
		MaxFileBytes: quantityOr(l.MaxFileBytes, DefaultMaxFileBytes), MaxFileDocuments: DefaultMaxFileDocuments,
		MaxModuleBytes: quantityOr(l.MaxModuleBytes, DefaultMaxModuleBytes),
	}
	if l.MaxTimeout != nil && l.MaxTimeout.Duration > 0 {
		e.MaxTimeout = l.MaxTimeout.Duration
	}
	if l.MaxFileDocuments != nil && *l.MaxFileDocuments > 0 {
		e.MaxFileDocuments = int(*l.MaxFileDocuments)
	}
	e.AllowPruneProtected = l.AllowPruneProtected != nil && *l.AllowPruneProtected
	e.AllowEmpty = l.AllowEmpty != nil && *l.AllowEmpty
	return e
}

// quantityOr is q's value when q is set, else def.
func quantityOr(q *resource.Quantity, def int64) int64 {
	if q == nil || q.Value() <= 0 {
		return def
	}
	return q.Value()
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

package v1alpha1

import "path"

// Allows reports whether objects may be put in namespace ns: it must match an allow
// pattern (when any are given) and no deny pattern. Patterns are path.Match globs.
func (p NamespacePolicy) Allows(ns string) bool {
	if matchAny(p.Deny, ns) {
		return false
	}
	return len(p.Allow) == 0 || matchAny(p.Allow, ns)
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, s); err == nil && ok {
			return true
		}
	}
	return false
}

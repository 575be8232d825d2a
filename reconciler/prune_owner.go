package reconciler

import (
	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render/declarations"
)

// The prune guards count each owner's instances apart: a tenant's are those its paths
// declare, the platform team's ("") the others. A removed instance is owned by the
// tenant whose paths hold the file its CR records as its source.

// ownerOf is the tenant that owns mi ("" for the platform team).
func (in *revisionInput) ownerOf(mi *cairnv1.ModuleInstance) string {
	if in.set.Instance(mi.Namespace, mi.Name) != nil {
		if t := in.set.Tenant(mi.Namespace, mi.Name); t != nil {
			return t.Name
		}
		return ""
	}
	return in.fileOwner(mi.Annotations[sourceAnnotation])
}

// fileOwner is the tenant whose paths hold file ("" for the platform team).
func (in *revisionInput) fileOwner(file string) string {
	if file == "" || in.set.Platform == nil {
		return ""
	}
	if t := declarations.OwnerOf(&in.set.Platform.Spec, file); t != nil {
		return t.Name
	}
	return ""
}

// liveByOwner counts the live instances of each owner: the whole of the
// half-of-instances rule.
func (s *RevisionState) liveByOwner() map[string]int {
	out := map[string]int{}
	for _, mi := range s.live {
		out[s.ownerOf(mi)]++
	}
	return out
}

// trailerCovers reports whether the commit's cairn-allow-prune trailer may speak for
// mi: without tenants, for every instance, as the platform team writes every file;
// with tenants, only when the commit changes mi's declaration file or, for an instance
// that left Git (its file may be gone), a file of its owner. An unknown diff covers
// none: who wrote the commit cannot be told.
func (in *revisionInput) trailerCovers(mi *cairnv1.ModuleInstance, removed bool) bool {
	switch {
	case !in.guard.Tenants():
		return true
	case !in.changes.known:
		return false
	case !removed:
		origin := in.set.Origins[declarations.Key(cairnv1.ModuleInstanceKind, mi.Namespace, mi.Name)]
		return origin.File != "" && in.changes.touches(origin.File)
	}
	owner := in.ownerOf(mi)
	for _, p := range in.changes.paths {
		if in.fileOwner(p) == owner {
			return true
		}
	}
	return false
}

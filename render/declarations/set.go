package declarations

import (
	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Origin is where a document came from.
type Origin struct {
	// File is relative to the root of the tree.
	File string
	// Line is the 1-based line where the document starts.
	Line int
}

// Set is the loaded declarations of one revision of a platform repository.
type Set struct {
	// Platform is nil only when Load returned an error (none, two, or an invalid one).
	Platform *cairnv1.Platform
	// Registries are the valid Registries, sorted by name.
	Registries []*cairnv1.Registry
	// Instances are the valid instances in dependsOn order (dependencies first), ties
	// broken by namespace/name.
	Instances []*cairnv1.ModuleInstance
	// Origins maps Key(kind, namespace, name) of every identified document, valid or not,
	// to where it is declared (the first declaration when it is declared twice).
	Origins map[string]Origin
	// Invalid lists the problems that leave the rest of the repository usable.
	Invalid []*Error
	// Unparsed lists files that could not be read or parsed, or that hold a document whose
	// identity could not be read: the instances they declare are unknown, so the caller
	// must not delete any instance on this revision.
	Unparsed []string

	instances map[string]*cairnv1.ModuleInstance
	// tenants maps an instance id to the tenant whose paths hold its declaration.
	tenants    map[string]*cairnv1.Tenant
	registries map[string]*cairnv1.Registry
	// dependents maps an instance id to the ids of the decoded instances, valid or not,
	// that name it in dependsOn.
	dependents map[string][]string
}

// Key identifies a declaration: "ModuleInstance/team-a/podinfo", "Platform//cluster".
func Key(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// Instance returns the valid instance namespace/name, or nil.
func (s *Set) Instance(namespace, name string) *cairnv1.ModuleInstance {
	return s.instances[instanceID(namespace, name)]
}

// Tenant returns the tenant whose paths hold the declaration of instance
// namespace/name, or nil when it is the platform team's (under no tenant's paths).
func (s *Set) Tenant(namespace, name string) *cairnv1.Tenant {
	return s.tenants[instanceID(namespace, name)]
}

// Registry returns the valid Registry name, or nil.
func (s *Set) Registry(name string) *cairnv1.Registry {
	return s.registries[name]
}

// Dependents returns the valid instances that depend on namespace/name, directly or
// transitively (also through invalid instances), in the order of Instances. The instance
// itself need not be valid.
func (s *Set) Dependents(namespace, name string) []*cairnv1.ModuleInstance {
	reached := map[string]bool{}
	queue := []string{instanceID(namespace, name)}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, dependent := range s.dependents[id] {
			if !reached[dependent] {
				reached[dependent] = true
				queue = append(queue, dependent)
			}
		}
	}
	if len(reached) == 0 {
		return nil // most instances have no dependents: no walk over every instance, once per affected one
	}
	var out []*cairnv1.ModuleInstance
	for _, mi := range s.Instances {
		if reached[instanceID(mi.Namespace, mi.Name)] {
			out = append(out, mi)
		}
	}
	return out
}

func instanceID(namespace, name string) string {
	return namespace + "/" + name
}

// DependencyIDs returns the namespace/name of each dependsOn entry of mi, an empty
// namespace meaning the instance's own.
func DependencyIDs(mi *cairnv1.ModuleInstance) []string {
	ids := make([]string, 0, len(mi.Spec.DependsOn))
	for _, ref := range mi.Spec.DependsOn {
		ns := ref.Namespace
		if ns == "" {
			ns = mi.Namespace
		}
		ids = append(ids, instanceID(ns, ref.Name))
	}
	return ids
}

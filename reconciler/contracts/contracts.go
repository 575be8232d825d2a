package contracts

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/internal/graph"
)

// CRDKind is the kind of a CustomResourceDefinition, as inventories record it.
var CRDKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// Set is the provider contracts of a set of instances, each keyed
// "namespace/name". The zero Set provides and requires nothing.
type Set struct {
	// provides maps an instance key to the kinds it provides, sorted.
	provides map[string][]schema.GroupKind
	// requires maps an instance key to its providers and, for each, the kinds it uses.
	requires map[string]map[string][]schema.GroupKind
	// providerOf maps each provided kind to the instance that provides it.
	providerOf map[schema.GroupKind]string
	// conflicts are kinds that more than one instance provides, with those instances.
	conflicts map[schema.GroupKind][]string
}

// Infer reads the contracts off each instance's objects; the instances of
// provided provide those kinds too (the instances not rendered this time, the
// kinds their status records; a provider whose render dropped a CRD still in
// use, that kind). An instance's own kinds are no requirement; a kind two
// instances provide is a conflict and gives no edge.
func Infer(objects map[string][]*unstructured.Unstructured, provided map[string][]schema.GroupKind) Set {
	c := Set{
		provides:   map[string][]schema.GroupKind{},
		requires:   map[string]map[string][]schema.GroupKind{},
		providerOf: map[schema.GroupKind]string{},
		conflicts:  map[schema.GroupKind][]string{},
	}
	for _, key := range slices.Sorted(maps.Keys(provided)) {
		for _, gk := range provided[key] {
			c.provide(key, gk)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(objects)) {
		for gk := range crds.Scopes(objects[key]) {
			c.provide(key, gk)
		}
	}
	for key, objs := range objects {
		for _, u := range objs {
			c.require(key, u.GroupVersionKind().GroupKind())
		}
	}
	for key := range c.provides {
		slices.SortFunc(c.provides[key], CompareGroupKinds)
	}
	for _, by := range c.requires {
		for p := range by {
			slices.SortFunc(by[p], CompareGroupKinds)
		}
	}
	return c
}

func (c *Set) provide(key string, gk schema.GroupKind) {
	if gk.Kind == "" {
		return
	}
	c.provides[key] = append(c.provides[key], gk)
	if other, ok := c.providerOf[gk]; ok && other != key {
		c.conflicts[gk] = append(c.conflicts[gk], key)
		if len(c.conflicts[gk]) == 1 {
			c.conflicts[gk] = []string{other, key}
		}
		return
	}
	c.providerOf[gk] = key
}

func (c *Set) require(key string, gk schema.GroupKind) {
	p, ok := c.providerOf[gk]
	if !ok || p == key || len(c.conflicts[gk]) > 0 {
		return
	}
	if c.requires[key] == nil {
		c.requires[key] = map[string][]schema.GroupKind{}
	}
	if !slices.Contains(c.requires[key][p], gk) {
		c.requires[key][p] = append(c.requires[key][p], gk)
	}
}

// Providers returns the instances key requires, sorted.
func (c Set) Providers(key string) []string {
	return slices.Sorted(maps.Keys(c.requires[key]))
}

// ProviderOf returns the instance that provides gk ("" when none does).
func (c Set) ProviderOf(gk schema.GroupKind) string {
	return c.providerOf[gk]
}

// Conflicts returns the kinds more than one instance provides, sorted.
func (c Set) Conflicts() []schema.GroupKind {
	return slices.SortedFunc(maps.Keys(c.conflicts), CompareGroupKinds)
}

// Conflicting returns the instances that provide gk when more than one does, in
// the order they were found (recorded providers first).
func (c Set) Conflicting(gk schema.GroupKind) []string {
	return c.conflicts[gk]
}

// Recall adds the requirements key recorded in its status when it was last
// synced (it was not rendered this time) that still hold: the provider still
// provides the kind.
func (c *Set) Recall(key string, reqs []cairnv1.ContractRequirement) {
	for _, req := range reqs {
		for _, gk := range ParseKindNames(req.Kinds) {
			if c.providerOf[gk] == req.Instance && len(c.conflicts[gk]) == 0 {
				c.require(key, gk)
			}
		}
	}
}

// ProvidedNames are the kinds key provides, as status.provides records them.
func (c Set) ProvidedNames(key string) []string {
	var out []string
	for _, gk := range c.provides[key] {
		out = append(out, gk.String())
	}
	return out
}

// Requirements are the providers key requires, as status.requires records them.
func (c Set) Requirements(key string) []cairnv1.ContractRequirement {
	var out []cairnv1.ContractRequirement
	for _, p := range c.Providers(key) {
		req := cairnv1.ContractRequirement{Instance: p}
		for _, gk := range c.requires[key][p] {
			req.Kinds = append(req.Kinds, gk.String())
		}
		out = append(out, req)
	}
	return out
}

// Edges are the contract edges of the instance graph, one per requirer,
// provider and kind.
func (c Set) Edges() []graph.Edge {
	var out []graph.Edge
	for key, by := range c.requires {
		for provider, kinds := range by {
			for _, gk := range kinds {
				out = append(out, graph.Edge{From: key, To: provider, Kind: graph.Contract, Label: gk.String()})
			}
		}
	}
	return out
}

// Unserved are the requirements of key whose kinds its providers have not served
// yet: served returns the kinds a provider's status records it provides
// (status.provides). A provider that served a kind once is not waited on for it
// again (activation latches).
func (c Set) Unserved(key string, served func(provider string) []string) []cairnv1.ContractRequirement {
	var out []cairnv1.ContractRequirement
	for _, req := range c.Requirements(key) {
		had := served(req.Instance)
		var kinds []string
		for _, k := range req.Kinds {
			if !slices.Contains(had, k) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) > 0 {
			out = append(out, cairnv1.ContractRequirement{Instance: req.Instance, Kinds: kinds})
		}
	}
	return out
}

// RequiresKinds tells whether live's status records that it uses one of kinds of
// provider.
func RequiresKinds(live *cairnv1.ModuleInstance, provider string, kinds map[schema.GroupKind]bool) bool {
	return slices.ContainsFunc(live.Status.Requires, func(req cairnv1.ContractRequirement) bool {
		return req.Instance == provider && slices.ContainsFunc(req.Kinds, func(k string) bool {
			return kinds[schema.ParseGroupKind(k)]
		})
	})
}

// ParseKindNames reads the kinds of a status.provides; an entry that does not
// parse is skipped.
func ParseKindNames(names []string) []schema.GroupKind {
	var out []schema.GroupKind
	for _, n := range names {
		if gk := schema.ParseGroupKind(n); gk.Kind != "" {
			out = append(out, gk)
		}
	}
	return out
}

// CompareGroupKinds orders kinds by group, then kind.
func CompareGroupKinds(a, b schema.GroupKind) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind))
}

package reconciler

import (
	"cmp"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
)

// contracts are the provider contracts inferred from the renders: an instance
// whose render holds a CustomResourceDefinition provides that group/kind, and an
// instance whose render holds objects of a kind another instance provides
// requires that provider. Nothing is authored.
type contracts struct {
	// provides maps an instance key to the kinds it provides, sorted.
	provides map[string][]schema.GroupKind
	// requires maps an instance key to its providers and, for each, the kinds it uses.
	requires map[string]map[string][]schema.GroupKind
	// providerOf maps each provided kind to the instance that provides it.
	providerOf map[schema.GroupKind]string
	// conflicts are kinds that more than one instance provides, with those instances.
	conflicts map[schema.GroupKind][]string
}

// inferContracts reads the contracts off each instance's objects (keyed
// "namespace/name"). An instance's own kinds are no requirement; a kind two
// instances provide is a conflict and gives no edge.
func inferContracts(objects map[string][]*unstructured.Unstructured) contracts {
	return inferContractsWith(objects, nil)
}

// inferContractsWith is inferContracts where the instances of provided provide
// those kinds too: the instances not rendered this time, the kinds their status
// records; a provider whose render dropped a CRD still in use, that kind.
func inferContractsWith(objects map[string][]*unstructured.Unstructured, provided map[string][]schema.GroupKind) contracts {
	c := contracts{
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
		slices.SortFunc(c.provides[key], compareGroupKinds)
	}
	for _, by := range c.requires {
		for p := range by {
			slices.SortFunc(by[p], compareGroupKinds)
		}
	}
	return c
}

func (c *contracts) provide(key string, gk schema.GroupKind) {
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

func (c *contracts) require(key string, gk schema.GroupKind) {
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

// providers returns the instances key requires, sorted.
func (c contracts) providers(key string) []string {
	return slices.Sorted(maps.Keys(c.requires[key]))
}

// recall adds the requirements key recorded in its status when it was last
// synced (it was not rendered this time) that still hold: the provider still
// provides the kind.
func (c *contracts) recall(key string, reqs []cairnv1.ContractRequirement) {
	for _, req := range reqs {
		for _, gk := range parseKindNames(req.Kinds) {
			if c.providerOf[gk] == req.Instance && len(c.conflicts[gk]) == 0 {
				c.require(key, gk)
			}
		}
	}
}

// providedNames are the kinds key provides, as status.provides records them.
func (c contracts) providedNames(key string) []string {
	var out []string
	for _, gk := range c.provides[key] {
		out = append(out, gk.String())
	}
	return out
}

// requirements are the providers key requires, as status.requires records them.
func (c contracts) requirements(key string) []cairnv1.ContractRequirement {
	var out []cairnv1.ContractRequirement
	for _, p := range c.providers(key) {
		req := cairnv1.ContractRequirement{Instance: p}
		for _, gk := range c.requires[key][p] {
			req.Kinds = append(req.Kinds, gk.String())
		}
		out = append(out, req)
	}
	return out
}

// parseKindNames reads the kinds of a status.provides; an entry that does not
// parse is skipped.
func parseKindNames(names []string) []schema.GroupKind {
	var out []schema.GroupKind
	for _, n := range names {
		if gk := schema.ParseGroupKind(n); gk.Kind != "" {
			out = append(out, gk)
		}
	}
	return out
}

func compareGroupKinds(a, b schema.GroupKind) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind))
}

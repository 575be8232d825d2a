package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render/declarations"
)

// inferContracts reads the provider contracts of the revision once its renders
// are done: from the render of each instance rendered this time, and from the
// status of the others (what they provide, as last recorded). An instance that
// renders the CRD of a kind another instance provides fails (failConflicts) and
// provides nothing. kept are kinds rendered instances go on providing although
// their render dropped the CRD (see keepWithdrawn), nil the first time.
func (s *RevisionState) inferContracts(kept map[string][]schema.GroupKind) {
	objects := map[string][]*unstructured.Unstructured{}
	recorded := map[string]*instanceState{} // not rendered: their status says
	for _, r := range s.runs {
		switch {
		case r.rendered != nil && !s.conflicted[r.key()]:
			objects[r.key()] = r.shape.kindObjects()
		case r.was != nil:
			recorded[r.key()] = r
		}
	}
	infer := func() {
		provided := maps.Clone(kept)
		if provided == nil {
			provided = map[string][]schema.GroupKind{}
		}
		for key, r := range recorded {
			provided[key] = contracts.ParseKindNames(r.was.Status.Provides)
		}
		s.contracts = contracts.Infer(objects, provided)
		for key, r := range recorded {
			s.contracts.Recall(key, r.was.Status.Requires)
		}
	}
	infer()
	if failed := s.failConflicts(); len(failed) > 0 {
		for _, r := range failed {
			s.conflicted[r.key()] = true
			delete(objects, r.key())
			if r.was != nil {
				recorded[r.key()] = r
			}
		}
		infer()
	}
	s.failCycles()
}

// provideWithdrawn infers the contracts again once the prunes are decided, when
// providers keep CRDs their renders dropped (keepWithdrawn): they go on
// providing those kinds.
func (s *RevisionState) provideWithdrawn() {
	kept := map[string][]schema.GroupKind{}
	for _, r := range s.runs {
		for _, w := range r.withdrawn {
			kept[r.key()] = append(kept[r.key()], w.kind)
		}
	}
	if len(kept) > 0 {
		s.inferContracts(kept)
	}
}

// recordedContracts are what a successfully synced instance records that it
// provides and requires.
func (s *RevisionState) recordedContracts(key string, v *instanceVerdicts) ([]string, []cairnv1.ContractRequirement) {
	c := s.contractsOf(v)
	return c.ProvidedNames(key), c.Requirements(key)
}

// pendingProviders are the providers r requires for kinds they have not served
// yet (not in their status.provides): r waits for them within the sync. A
// provider that served a kind once is never waited on for it again (activation
// latches), and an instance in a cycle waits on no provider (it fails instead).
func (s *RevisionState) pendingProviders(r *instanceState) []cairnv1.ContractRequirement {
	if !r.fast && s.cyclic[r.key()] { // a fast instance's are its own (contractsOf): s.cyclic may be being written
		return nil
	}
	return s.pendingIn(s.contractsOf(&r.instanceVerdicts), r)
}

// pendingIn are the providers r requires by contracts c for kinds they have not
// served yet (their status.provides, as the revision step found it).
func (s *RevisionState) pendingIn(c contracts.Set, r *instanceState) []cairnv1.ContractRequirement {
	return c.Unserved(r.key(), func(provider string) []string {
		if p := s.byKey[provider]; p != nil && p.was != nil {
			return p.was.Status.Provides
		}
		return nil
	})
}

// providerVerdict is why an instance must wait for a provider it requires (nil:
// it may go ahead): the provider has no outcome yet, or is not ready.
func providerVerdict(d dependencyState) *outcome.Failure {
	kinds := strings.Join(d.kinds, ", ")
	switch {
	case !d.declared:
		return outcome.NewWaiting(cairnv1.ReasonProviderNotReady, fmt.Errorf("provider %s of %s is not a valid instance", d.key, kinds))
	case d.outcome == nil:
		return nil
	case d.outcome.Result.Action == outcome.ActionProgressing:
		return outcome.NewWaiting(cairnv1.ReasonProviderNotReady, fmt.Errorf("provider %s of %s is progressing: applied, not yet healthy", d.key, kinds))
	case !d.outcome.SatisfiesDependents:
		return outcome.NewWaiting(cairnv1.ReasonProviderNotReady, fmt.Errorf("provider %s of %s is not ready", d.key, kinds))
	}
	return nil
}

// failCycles fails the instances that dependsOn and contract edges together put
// in a cycle (dependsOn alone cannot make one: declarations refuses them), naming
// the cycle, so that nothing waits on them for ever.
func (s *RevisionState) failCycles() {
	s.cyclic = map[string]bool{}
	edges := map[string][]string{}
	for _, r := range s.runs {
		edges[r.key()] = declarations.DependencyIDs(r.mi)
		for _, p := range s.pendingProviders(r) {
			edges[r.key()] = append(edges[r.key()], p.Instance)
		}
	}
	for _, cycle := range contracts.Cycles(edges) {
		err := fmt.Errorf("a cycle of dependsOn and provided kinds: %s", strings.Join(append(cycle, cycle[0]), " -> "))
		for _, key := range cycle {
			s.cyclic[key] = true
			if r := s.byKey[key]; r != nil && r.affected && !r.fast { // a fast one may be applying: it waits on no provider
				r.setFailure(outcome.NewStalled(cairnv1.ReasonDependencyCycle, err))
			}
		}
	}
}

// maxNamedRequirers is how many remaining requirers a refused removal names.
const maxNamedRequirers = 10

// dependentsRemain refuses the removal of a provider while instances that stay
// in Git use kinds it provides: those rendered this time by their objects, the
// others by their status.requires.
func (s *RevisionState) dependentsRemain(live *cairnv1.ModuleInstance) *outcome.Failure {
	key := live.Namespace + "/" + live.Name
	kinds := map[schema.GroupKind]bool{}
	for _, gk := range contracts.ParseKindNames(live.Status.Provides) {
		if s.contracts.ProviderOf(gk) == "" { // another instance provides it now
			kinds[gk] = true
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	requirers := s.usersOf(key, kinds, false) // those removed with it go first
	if len(requirers) == 0 {
		return nil
	}
	return outcome.NewStalled(cairnv1.ReasonDependentsRemain, fmt.Errorf(
		"%s left Git but %d instance(s) still use the kinds it provides (%s): %s; remove them first, or in the same commit",
		key, len(requirers), strings.Join(live.Status.Provides, ", "), namedSome(requirers)))
}

// usesKinds tells whether r, which stays in Git, uses one of kinds of provider.
func usesKinds(r *instanceState, provider string, kinds map[schema.GroupKind]bool) bool {
	if r.rendered != nil {
		return r.shape.uses(kinds)
	}
	return r.was != nil && contracts.RequiresKinds(r.was, provider, kinds)
}

// standing are the CRs this revision does not sync that keep their objects: those
// whose file could not be read, and those whose declaration is invalid. What they
// use, their status records.
func (s *RevisionState) standing() []*cairnv1.ModuleInstance {
	out := slices.Clone(s.held)
	for _, inv := range s.set.Invalid {
		if live := s.live[inv.Object]; live != nil && inv.Kind == cairnv1.ModuleInstanceKind {
			out = append(out, live)
		}
	}
	return out
}

// usersOf are the instances that stay and use one of kinds of provider, sorted:
// those of the revision (by their render, else their status), those it does not
// sync (standing) and, with removed, those that left Git in this commit (they
// are removed after the others' applies, and until then use the kinds).
func (s *RevisionState) usersOf(provider string, kinds map[schema.GroupKind]bool, removed bool) []string {
	var out []string
	for _, r := range s.runs {
		if r.key() != provider && usesKinds(r, provider, kinds) {
			out = append(out, r.key())
		}
	}
	others := s.standing()
	if removed {
		others = append(others, s.removed...)
	}
	for _, live := range others {
		if key := live.Namespace + "/" + live.Name; key != provider && contracts.RequiresKinds(live, provider, kinds) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

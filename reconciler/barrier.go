package reconciler

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/secretgen"
	"cairn.dev/cairn/render"
)

// Per-instance renders and the render barrier (docs/architecture.md, "The render
// barrier"). A sync renders each affected instance in its own goroutine; once its
// render is done, settle decides, from that render, its last inventory and what the
// other instances' CRs record, whether its apply may go ahead without waiting for
// any other render of the revision (fast). It may unless a verdict of its apply
// needs every render: it would delete objects (a move to another instance, the
// per-tenant caps and the half rule count every instance's deletions), it renders a
// CRD it did not apply before (another render may provide the same kind), it uses a
// kind the cluster does not serve (its scope may come from another render's CRD),
// or it requires a kind whose provider has not served it yet. Those instances wait
// for the barrier: every affected instance rendered, then the verdicts over all of
// them (decideTogether). The common change — new objects, new content of objects
// an instance owns, kinds the cluster serves — waits for no one, so a slow render
// delays only its own instance and the prunes, moves and new providers of the
// revision.

// settle places r's render once it is done, when every kind it uses is served, and
// decides whether r's apply waits for the barrier. It runs in r's render goroutine,
// before the barrier can be passed, so that decideTogether never writes to an
// instance whose apply has started.
func (s *RevisionState) settle(ctx context.Context, r *instanceState) {
	defer s.recoverInto(ctx, r, "placement")
	if r.failure != nil || r.render.res == nil {
		r.fast = true // a failed render fails alone, at once
		return
	}
	old, err := s.lastInventory(ctx, r)
	if err != nil {
		r.render.res, r.fast = nil, true
		r.setFailure(outcome.NewTransient(cairnv1.ReasonPruneFailed, err))
		return
	}
	r.oldInv, r.oldLoaded = old, true
	if !s.servesAll(r.render.res) {
		return // placed by the barrier, with the scopes of every render's CRDs
	}
	s.placeInstance(ctx, r, nil)
	if r.failure != nil {
		r.fast = true
		return
	}
	r.fast = s.mayApplyAlone(r)
}

// servesAll tells whether the cluster serves the kind of every object and hook of
// res.
func (v *clusterView) servesAll(res *render.Result) bool {
	for _, u := range append(res.Objects, hooks.Objects(res.Hooks)...) {
		gvk := u.GroupVersionKind()
		if _, err := v.kinds.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return false
		}
	}
	return true
}

// mayApplyAlone tells whether r, placed, may apply without the barrier (see the top
// of this file); when it may, r.contracts are its own provider contracts, read
// against what the other instances' CRs record.
func (s *RevisionState) mayApplyAlone(r *instanceState) bool {
	for _, u := range r.objects {
		if _, had := r.oldInv[apply.ObjectID(u)]; crds.Is(u) && !had {
			return false
		}
	}
	if len(r.oldInv.Minus(r.desiredInventory(s.digestKey))) > 0 {
		return false
	}
	c := contracts.Infer(map[string][]*unstructured.Unstructured{r.key(): r.objects}, s.recordedProvides(r.key()))
	if len(c.Conflicts()) > 0 || len(s.pendingIn(c, r)) > 0 {
		return false
	}
	r.contracts = &c
	return true
}

// recordedProvides are the kinds the instances of the revision other than key
// provide, as their CRs record (read once per revision).
func (s *RevisionState) recordedProvides(key string) map[string][]schema.GroupKind {
	s.providesOnce.Do(func() {
		s.provides = map[string][]schema.GroupKind{}
		for _, r := range s.runs {
			if r.was != nil && len(r.was.Status.Provides) > 0 {
				s.provides[r.key()] = contracts.ParseKindNames(r.was.Status.Provides)
			}
		}
	})
	if _, own := s.provides[key]; !own {
		return s.provides
	}
	out := maps.Clone(s.provides)
	delete(out, key)
	return out
}

// claimObjects claims, in a sync, the objects of r's render and its generated
// Secrets for r: an object another instance of the revision has claimed already
// fails r with OwnershipConflict naming it, unless r's inventory holds the object (r
// owns it: the other is refused when it reads the object's owner). The first to
// claim an object no instance owns keeps it (CRDs aside). A plan (no claim table) decides over
// every render instead (claimShared).
func (s *RevisionState) claimObjects(r *instanceState, objects []*unstructured.Unstructured) *outcome.Failure {
	if s.claims == nil {
		return nil
	}
	ids := map[string]bool{}
	for _, u := range objects {
		// A CRD two instances render is a contract conflict, decided at the barrier
		// over every render (failConflicts): a new CRD always waits for it.
		if !crds.Is(u) {
			ids[apply.ObjectID(u)] = true
		}
	}
	for id := range secretgen.Inventory(r.mi) {
		ids[id] = true
	}
	s.claimsMu.Lock()
	defer s.claimsMu.Unlock()
	for id := range ids {
		other := s.claims[id]
		if _, owns := r.oldInv[id]; other != nil && other != r && !owns {
			return sharedConflict(id, r, nil, []*instanceState{r, other})
		}
	}
	for id := range ids {
		if _, owns := r.oldInv[id]; owns || s.claims[id] == nil {
			s.claims[id] = r
		}
	}
	return nil
}

// awaitPlaced waits, in a sync, until r's objects are placed (or its render
// failed), so that another instance's reconcile may read them (see releases).
func (r *instanceState) awaitPlaced(ctx context.Context) {
	if r.placed == nil {
		return // a plan: everything is placed before anything reads it
	}
	select {
	case <-r.placed:
	case <-ctx.Done():
	}
}

// contractsOf are the contracts r's reconcile acts on: its own when it applies
// without the barrier, else the revision's.
func (s *RevisionState) contractsOf(r *instanceVerdicts) contracts.Set {
	if r.fast {
		if r.contracts == nil {
			return contracts.Set{} // its render failed: it provides and requires nothing new
		}
		return *r.contracts
	}
	return s.contracts
}

// decideTogether is the barrier's work, once every affected instance has rendered:
// it places the renders that waited for every CRD's scope, infers the revision's
// contracts, decides the prune verdicts (moves, the caps) and lets the instances
// whose placement waited be read.
func (s *RevisionState) decideTogether(ctx context.Context) {
	var late []*instanceState
	for _, r := range s.runs {
		if r.render.res != nil {
			late = append(late, r)
		}
	}
	s.placeAll(ctx)
	for _, r := range late {
		close(r.placed)
	}
	s.inferContracts(nil)
	if !interrupted(ctx) {
		s.checkPrunes(ctx)
		s.provideWithdrawn()
	}
}

package reconciler

import (
	"context"
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
)

// checkPrunes computes what each rendered instance and each removed instance would
// delete, and applies the guards before anything is deleted: an empty render, the
// share an instance may lose, and, for each owner's instances apart (each tenant's, the
// platform team's), the total per sync and the share of instances removed.
// An object that moves to another instance in this revision is transferred, not deleted.
func (s *RevisionState) checkPrunes(ctx context.Context) {
	desired := apply.Inventory{}
	for _, r := range s.runs {
		if r.rendered != nil {
			desired = desired.Union(r.shapeInventory()) // by id: what the others' prunes leave out
		}
	}
	var sets []*prune.Set
	for _, r := range s.runs {
		if r.fast {
			continue // it deletes nothing (mayApplyAlone) and may be applying
		}
		if ps := s.instancePrune(ctx, r, desired); ps != nil {
			sets = append(sets, ps)
		}
	}
	s.removedSets = map[string]removedSet{}
	for _, live := range s.removed {
		rs := s.removedPrune(ctx, live, desired)
		s.removedSets[live.Namespace+"/"+live.Name] = rs
		sets = append(sets, rs.Set)
	}
	s.pruneErrs = s.guard.CheckSync(sets, s.liveByOwner())
	s.countRefusals()
}

// countRefusals counts the prune refusals of a sync (a plan's are not counted): the
// sync-wide ones, once per refused owner, and each instance's.
func (s *RevisionState) countRefusals() {
	if s.readOnly {
		return
	}
	errs := append([]error{}, s.pruneErrs...)
	for _, r := range s.runs {
		errs = append(errs, r.pruneErr)
	}
	for _, err := range errs {
		if limit := prune.RefusedBy(err); limit != "" {
			s.e.opts.Metrics.CountPruneRefusal(limit)
		}
	}
}

func (s *RevisionState) instancePrune(ctx context.Context, r *instanceState, desired apply.Inventory) *prune.Set {
	if r.rendered == nil {
		return nil
	}
	old, err := r.oldInv, error(nil)
	if !r.oldLoaded { // a plan's: a sync's was read once rendered (settle)
		old, err = s.lastInventory(ctx, r)
	}
	if err != nil {
		r.setFailure(outcome.NewTransient(cairnv1.ReasonPruneFailed, err))
		return nil
	}
	if r.was == nil && len(old) == 0 {
		return nil // a new instance
	}
	r.oldInv = old
	own := r.desiredInventory(s.digestKey) // generated Secrets included: they never leave with the render
	// Emptiness is the render's: the Secrets of spec.secrets stay whatever the module
	// renders, so they must not hide an empty render from its guard.
	if len(r.objects) == 0 && len(old) > 0 && !r.mi.Spec.AllowEmpty {
		r.pruneErr = prune.Refusal(prune.LimitEmptyRender, outcome.Failuref(outcome.Stalled, cairnv1.ReasonPruneGuard,
			"prune refused: the render is empty and would delete all %d objects; set spec.allowEmpty to allow it", len(old)))
		return nil
	}
	stale := old.Minus(own).Minus(desired)
	if r.withheld, err = s.keepWithdrawn(ctx, r, stale); err != nil {
		r.setFailure(outcome.NewTransient(cairnv1.ReasonPruneFailed, err))
		return nil
	}
	stale = stale.Minus(r.withheld)
	if !pruneEnabled(r.mi) {
		return nil
	}
	ps := s.guard.Split(s.instanceLabel(r.mi), stale, r.mi.Spec.PruneProtected)
	ps.Before = len(old)
	ps.Owner, ps.Covered = s.ownerOf(r.mi), s.trailerCovers(r.mi, false)
	if r.was != nil {
		ps.UID = string(r.was.UID) // adopted objects carry the UID of the deleted CR
	}
	r.prune = ps
	r.pruneErr = s.guard.CheckInstance(ps)
	return ps
}

// lastInventory is the inventory of r's CR, or, without a CR, what it left behind in
// the cluster (see adoptedInventory).
func (s *RevisionState) lastInventory(ctx context.Context, r *instanceState) (apply.Inventory, error) {
	if r.was == nil {
		return s.adoptedInventory(ctx, r)
	}
	return s.e.inventories().Load(ctx, r.was)
}

// removedSet is what a removed instance would delete (or, with prune: false,
// orphan), read once per sync; err is set when its inventory could not be read (the
// instance is then not removed).
type removedSet struct {
	*prune.Set
	orphan apply.Inventory
	err    error
}

// removedPrune reads what a removed instance would delete. With prune: false
// nothing is: every object of its inventory is orphaned. An object another instance
// renders in this revision moves to it and is neither deleted nor orphaned.
func (in *revisionInput) removedPrune(ctx context.Context, live *cairnv1.ModuleInstance, desired apply.Inventory) removedSet {
	old, err := in.e.inventories().Load(ctx, live)
	if err != nil {
		old = apply.Inventory{}
	}
	old = old.Minus(desired)
	rs := removedSet{err: err}
	if !pruneEnabled(live) {
		rs.Set, rs.orphan = &prune.Set{Key: in.instanceLabel(live), Stale: apply.Inventory{}}, old
	} else {
		rs.Set = in.guard.Split(in.instanceLabel(live), old, live.Spec.PruneProtected)
	}
	rs.Before, rs.Removed = len(old), true
	rs.Owner, rs.Covered = in.ownerOf(live), in.trailerCovers(live, true)
	rs.UID = string(live.UID) // an object labelled with another instance's UID is not this one's
	return rs
}

func (in *revisionInput) instanceLabel(mi *cairnv1.ModuleInstance) string {
	return cairnv1.InstanceKey(mi.Namespace, mi.Name)
}

func pruneEnabled(mi *cairnv1.ModuleInstance) bool {
	return mi.Spec.Prune == nil || *mi.Spec.Prune
}

// pruneRefusal is the reason an instance may not prune now, if any.
func (in *revisionInput) pruneRefusal(r *instanceVerdicts) error {
	if r.pruneErr != nil {
		return r.pruneErr
	}
	if r.prune != nil && len(r.prune.Stale) > 0 && r.prune.Refused != nil {
		return r.prune.Refused
	}
	return nil
}

// keptNote says which protected objects were left in place.
func keptNote(ps *prune.Set) string {
	if ps == nil || len(ps.Kept) == 0 {
		return ""
	}
	return fmt.Sprintf("; kept %d object(s) of protected kinds: %v", len(ps.Kept), ps.Kept)
}

package reconciler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/ownership"
	"cairn.dev/cairn/reconciler/secretgen"
)

// Ownership (see reconciler/ownership): the revision's side, what its instances
// render in common and what the other instances give up.

// claimShared fails, before anything is written, the instances of this revision whose
// renders hold the same object: the instance whose inventory holds it keeps it and the
// others fail with OwnershipConflict; when none holds it, all of them fail, since
// either may be the one meant.
func (s *RevisionState) claimShared() {
	claims := map[string][]*instanceState{}
	for _, r := range s.runs {
		if r.rendered == nil || r.failure != nil {
			continue
		}
		ids := r.shape.ids()
		for id := range secretgen.Inventory(r.mi) {
			ids[id] = true
		}
		for id := range ids {
			claims[id] = append(claims[id], r)
		}
	}
	ids := make([]string, 0, len(claims))
	for id, rs := range claims {
		if len(rs) > 1 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		rs := claims[id]
		var owner *instanceState
		for _, r := range rs {
			if _, ok := r.oldInv[id]; ok {
				owner = r
			}
		}
		for _, r := range rs {
			if r != owner {
				r.setFailure(sharedConflict(id, r, owner, rs))
			}
		}
	}
}

func sharedConflict(id string, r, owner *instanceState, rs []*instanceState) *outcome.Failure {
	what := describeID(id)
	if owner != nil {
		return outcome.Failuref(outcome.Stalled, cairnv1.ReasonOwnershipConflict,
			"%s is owned by instance %s, which renders it too: an object belongs to one instance", what, owner.key())
	}
	var others []string
	for _, o := range rs {
		if o != r {
			others = append(others, o.key())
		}
	}
	return outcome.Failuref(outcome.Stalled, cairnv1.ReasonOwnershipConflict,
		"%s is rendered by this instance and by %s in the same revision: an object belongs to one instance",
		what, strings.Join(others, ", "))
}

// checkOwnership decides, before anything of r is written, whether r may write each
// rendered object that r's inventory does not hold yet (see ownership.Check), asking
// as r's identity; valid holds the objects whose dry-run passed, which the apply does
// not dry-run again, and adopted the existing objects r takes over (spec.adopt).
func (s *RevisionState) checkOwnership(ctx context.Context, r *instanceReconcile) (valid map[string]bool, adopted []string, f *outcome.Failure) {
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return nil, nil, outcome.NewTransient(cairnv1.ReasonApplyFailed, err)
	}
	res, f := ownership.Check(ctx, m.Client(), ownership.Request{Instance: s.instanceLabel(r.mi), Objects: r.objects,
		Held: r.oldInv, Created: s.createdNamespace, Adopt: r.mi.Spec.Adopt}, owners{s})
	return res.Valid, res.Adopted, f
}

// owners answers ownership.Check from the revision.
type owners struct{ s *RevisionState }

func (o owners) Gone(owner string) bool { return o.s.ownerGone(owner) }

func (o owners) Releases(ctx context.Context, owner, id string) (bool, error) {
	return o.s.releases(ctx, owner, id)
}

// ownerGone reports whether the instance labelled owner has neither a CR nor a
// declaration: what it left behind is nobody's.
func (s *RevisionState) ownerGone(owner string) bool {
	key := ownership.Name(owner)
	return owner != "" && s.live[key] == nil && s.byKey[key] == nil
}

// releases reports whether the live instance labelled owner gives up the object id in
// this revision, or already has: it leaves Git, its render in this sync no longer
// holds the object, or its inventory does not (a move whose second half failed).
func (s *RevisionState) releases(ctx context.Context, owner, id string) (bool, error) {
	key := ownership.Name(owner)
	for _, gone := range s.removed {
		if gone.Namespace+"/"+gone.Name == key {
			return true, nil
		}
	}
	if o := s.byKey[key]; o != nil {
		o.awaitPlaced(ctx) // its render says, once placed
	}
	if o := s.byKey[key]; o != nil && o.rendered != nil {
		holds := o.shape.holds(id)
		return !holds, nil
	}
	live := s.live[key]
	if live == nil {
		return false, nil // declared, not rendered in this sync, and without a CR yet
	}
	inv, err := s.e.inventories().Load(ctx, live)
	if err != nil {
		return false, outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf("failed to read the inventory of %s: %w", key, err))
	}
	_, holds := inv[id]
	return !holds, nil
}

// idsOf is the set of the objects' inventory ids.
func idsOf(objects []*unstructured.Unstructured) map[string]bool {
	ids := make(map[string]bool, len(objects))
	for _, u := range objects {
		ids[apply.ObjectID(u)] = true
	}
	return ids
}

// describeID names an inventory id the way describe names an object.
func describeID(id string) string {
	if d := describeIDs(apply.Inventory{id: {ID: id}}); len(d) == 1 {
		return d[0]
	}
	return id
}

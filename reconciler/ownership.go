package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/secretgen"
)

// Ownership: every applied object belongs to exactly one live instance, known by its
// inventory and by the labels on the live object (instance key and UID). An instance
// never writes an object another live instance owns, nor one that no cairn instance
// owns unless it opts in with spec.adopt; the one transfer is a move within a
// revision, where the owner's render (or its removal) gives the object up.

// claimShared fails, before anything is written, the instances of this revision whose
// renders hold the same object: the instance whose inventory holds it keeps it and the
// others fail with OwnershipConflict; when none holds it, all of them fail, since
// either may be the one meant.
func (s *syncRun) claimShared() {
	claims := map[string][]*instanceRun{}
	for _, r := range s.runs {
		if r.rendered == nil || r.failure != nil {
			continue
		}
		ids := idsOf(r.objects)
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
		var owner *instanceRun
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

func sharedConflict(id string, r, owner *instanceRun, rs []*instanceRun) *outcome.Failure {
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
// rendered object that r's inventory does not hold yet, and fails r with
// OwnershipConflict when one exists and is not r's to take (see claim). It asks the
// API server by the dry-run the apply's validation sends anyway (apply.DryRun), which
// says whether the object exists, and reads only the objects that do; valid holds the
// objects whose dry-run passed, which the apply does not dry-run again. An object in a
// namespace this sync created is not asked about: nothing in it predates the sync, and
// what other instances of the sync render there claimShared has checked. The objects r
// adopts are recorded in r.adopted.
func (s *syncRun) checkOwnership(ctx context.Context, r *instanceRun) (valid map[string]bool, f *outcome.Failure) {
	var fresh []*unstructured.Unstructured
	for _, u := range r.objects {
		if _, ok := r.oldInv[apply.ObjectID(u)]; !ok && (u.GetNamespace() == "" || !s.createdNamespace(u.GetNamespace())) {
			fresh = append(fresh, u)
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	// Asked as the instance's identity, which is to write them: cairn itself may read
	// no tenant's objects.
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return nil, outcome.NewTransient(cairnv1.ReasonApplyFailed, err)
	}
	var mu sync.Mutex
	valid = map[string]bool{}
	errs := apply.ForEach(fresh, apply.Concurrency, func(u *unstructured.Unstructured) error {
		exists, err := apply.DryRun(ctx, m.Client(), u)
		switch {
		case err == nil:
			mu.Lock()
			valid[apply.ObjectID(u)] = true
			mu.Unlock()
			if !exists {
				return nil
			}
		case meta.IsNoMatchError(err):
			return nil // its definition comes with this render
		}
		// It exists, or its dry-run failed (the apply's validation reports why) and
		// the read tells whether it exists.
		adopt, err := s.claim(ctx, m.Client(), r, u)
		if adopt {
			mu.Lock()
			r.adopted = append(r.adopted, apply.Describe(u))
			mu.Unlock()
		}
		return err
	})
	sort.Strings(r.adopted)
	if len(errs) == 0 {
		return valid, nil
	}
	if errors.As(errors.Join(errs...), &f) { // a failed read: transient, or denied
		return nil, f
	}
	return nil, outcome.Failuref(outcome.Stalled, cairnv1.ReasonOwnershipConflict, "%v", errors.Join(errs...))
}

// claim decides, reading with c, whether r may write u, which its inventory does not hold: yes when u
// does not exist, is labelled as r's, is a Namespace cairn created for instances, or is
// given up by its owner in this revision (see releases); an object no cairn instance
// owns only with spec.adopt (adopt is then true).
func (s *syncRun) claim(ctx context.Context, c client.Client, r *instanceRun, u *unstructured.Unstructured) (adopt bool, err error) {
	live, err := apply.GetLive(ctx, c, u)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil // its definition comes with this render
	case err != nil:
		return false, outcome.Classify(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to read before applying: %w", apply.Describe(u), err))
	case live == nil:
		return false, nil
	}
	labels := live.GetLabels()
	owner := labels[cairnv1.InstanceLabel]
	if labels[cairnv1.ManagedByLabel] != cairnv1.ManagedByValue || s.ownerGone(owner) {
		owner = ""
	}
	switch {
	case owner == s.instanceLabel(r.mi):
		return false, nil
	case owner != "":
		ok, err := s.releases(ctx, owner, apply.ObjectID(u))
		if err != nil || ok {
			return false, err
		}
		return false, fmt.Errorf("%s is owned by instance %s", apply.Describe(u), ownerName(owner))
	case labels[cairnv1.ManagedByLabel] == cairnv1.ManagedByValue && u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "":
		return false, nil // created by cairn for the instances that live in it
	case labels[cairnv1.ManagedByLabel] == cairnv1.ManagedByValue && labels[cairnv1.InstanceLabel] == "":
		return false, fmt.Errorf("%s is cairn's own and cannot be adopted", apply.Describe(u))
	case r.mi.Spec.Adopt:
		return true, nil
	}
	return false, fmt.Errorf("%s already exists and no cairn instance owns it: set spec.adopt: true to take it over", apply.Describe(u))
}

// ownerGone reports whether the instance labelled owner has neither a CR nor a
// declaration: what it left behind is nobody's.
func (s *syncRun) ownerGone(owner string) bool {
	key := ownerName(owner)
	return owner != "" && s.live[key] == nil && s.byKey[key] == nil
}

// releases reports whether the live instance labelled owner gives up the object id in
// this revision, or already has: it leaves Git, its render in this sync no longer
// holds the object, or its inventory does not (a move whose second half failed).
func (s *syncRun) releases(ctx context.Context, owner, id string) (bool, error) {
	key := ownerName(owner)
	for _, gone := range s.removed {
		if gone.Namespace+"/"+gone.Name == key {
			return true, nil
		}
	}
	if o := s.byKey[key]; o != nil {
		o.awaitPlaced(ctx) // its render says, once placed
	}
	if o := s.byKey[key]; o != nil && o.rendered != nil {
		holds := idsOf(o.objects)[id]
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

// ownerName turns an instance label (<namespace>.<name>; a namespace has no dot)
// into namespace/name.
func ownerName(label string) string {
	ns, name, _ := strings.Cut(label, ".")
	return ns + "/" + name
}

// describeID names an inventory id the way describe names an object.
func describeID(id string) string {
	if d := describeIDs(apply.Inventory{id: {ID: id}}); len(d) == 1 {
		return d[0]
	}
	return id
}

// Package ownership decides, before anything of an instance's change is written,
// whether the instance may write each object it renders that its inventory does not
// hold yet (docs/architecture.md, step 6 of the path of one commit).
//
// Every applied object belongs to exactly one live instance, known by its inventory
// and by the labels on the live object (instance key and UID). An instance never
// writes an object another live instance owns, nor one that no cairn instance owns
// unless it opts in with spec.adopt; the one transfer is a move within a revision,
// where the owner's render (or its removal) gives the object up (Owners.Releases).
package ownership

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
)

// Owners is what the revision knows of the other instances.
type Owners interface {
	// Gone tells whether the instance labelled owner (<namespace>.<name>) has
	// neither a CR nor a declaration: what it left behind is nobody's.
	Gone(owner string) bool
	// Releases tells whether the instance labelled owner gives up the object id in
	// this revision, or already has.
	Releases(ctx context.Context, owner, id string) (bool, error)
}

// Request is one instance's check.
type Request struct {
	// Instance is the instance's label value (cairnv1.InstanceKey).
	Instance string
	// Objects are its rendered objects, labelled as its own.
	Objects []*unstructured.Unstructured
	// Held is its last inventory: objects it holds already are not checked.
	Held apply.Inventory
	// Created tells the namespaces this sync created: nothing in them predates the
	// sync, and what other instances of the sync render there the revision's claims
	// have checked, so their objects are not checked.
	Created func(namespace string) bool
	// Adopt is spec.adopt: an existing object no cairn instance owns may be taken.
	Adopt bool
}

// Result is what the check found.
type Result struct {
	// Valid holds the objects whose dry-run passed: the apply need not send it again.
	Valid map[string]bool
	// Adopted describes the existing objects no instance owned that the instance
	// takes over (spec.adopt), sorted.
	Adopted []string
}

// Check asks, with c (the instance's identity, which is to write them: cairn itself
// may read no tenant's objects), about each object of req that needs checking, by
// the dry-run the apply's validation sends anyway (apply.DryRun): its answer says
// whether the object exists, and only the objects that exist are read. It fails
// with OwnershipConflict when one is not the instance's to take (see claim), or
// with the failure of a read.
func Check(ctx context.Context, c client.Client, req Request, owners Owners) (Result, *outcome.Failure) {
	var fresh []*unstructured.Unstructured
	for _, u := range req.Objects {
		if _, ok := req.Held[apply.ObjectID(u)]; !ok && (u.GetNamespace() == "" || req.Created == nil || !req.Created(u.GetNamespace())) {
			fresh = append(fresh, u)
		}
	}
	res := Result{Valid: map[string]bool{}}
	if len(fresh) == 0 {
		return res, nil
	}
	var mu sync.Mutex
	errs := apply.ForEach(fresh, apply.Concurrency, func(u *unstructured.Unstructured) error {
		exists, err := apply.DryRun(ctx, c, u)
		switch {
		case err == nil:
			mu.Lock()
			res.Valid[apply.ObjectID(u)] = true
			mu.Unlock()
			if !exists {
				return nil
			}
		case meta.IsNoMatchError(err):
			return nil // its definition comes with this render
		}
		// It exists, or its dry-run failed (the apply's validation reports why) and
		// the read tells whether it exists.
		adopt, err := claim(ctx, c, req, u, owners)
		if adopt {
			mu.Lock()
			res.Adopted = append(res.Adopted, apply.Describe(u))
			mu.Unlock()
		}
		return err
	})
	sort.Strings(res.Adopted)
	if len(errs) == 0 {
		return res, nil
	}
	var f *outcome.Failure
	if errors.As(errors.Join(errs...), &f) { // a failed read: transient, or denied
		return Result{}, f
	}
	return Result{}, outcome.Failuref(outcome.Stalled, cairnv1.ReasonOwnershipConflict, "%v", errors.Join(errs...))
}

// claim decides, reading with c, whether the instance of req may write u, which its
// inventory does not hold: yes when u does not exist, is labelled as its own, is a
// Namespace cairn created for instances, or is given up by its owner in this
// revision; an object no cairn instance owns only with spec.adopt (adopt is then true).
func claim(ctx context.Context, c client.Client, req Request, u *unstructured.Unstructured, owners Owners) (adopt bool, err error) {
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
	if labels[cairnv1.ManagedByLabel] != cairnv1.ManagedByValue || (owner != "" && owners.Gone(owner)) {
		owner = ""
	}
	switch {
	case owner == req.Instance:
		return false, nil
	case owner != "":
		ok, err := owners.Releases(ctx, owner, apply.ObjectID(u))
		if err != nil || ok {
			return false, err
		}
		return false, fmt.Errorf("%s is owned by instance %s", apply.Describe(u), Name(owner))
	case labels[cairnv1.ManagedByLabel] == cairnv1.ManagedByValue && u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "":
		return false, nil // created by cairn for the instances that live in it
	case labels[cairnv1.ManagedByLabel] == cairnv1.ManagedByValue && labels[cairnv1.InstanceLabel] == "":
		return false, fmt.Errorf("%s is cairn's own and cannot be adopted", apply.Describe(u))
	case req.Adopt:
		return true, nil
	}
	return false, fmt.Errorf("%s already exists and no cairn instance owns it: set spec.adopt: true to take it over", apply.Describe(u))
}

// Name turns an instance label (<namespace>.<name>; a namespace has no dot) into
// namespace/name.
func Name(label string) string {
	ns, name, _ := strings.Cut(label, ".")
	return ns + "/" + name
}

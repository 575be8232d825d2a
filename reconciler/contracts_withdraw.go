package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
)

// withdrawal is a kind a provider's render no longer provides (its CRD left the
// render) while other instances still use it: the CRD is kept.
type withdrawal struct {
	kind  schema.GroupKind
	users []string // the instances that use kind, sorted
}

// keepWithdrawn sets aside, from the objects r's render dropped, the CRDs of
// kinds other instances still use (see usersOf): they stay in r's inventory and
// are neither pruned nor orphaned, r goes on providing their kinds
// (provideWithdrawn), and says so (ContractWithdrawn). Each dropped CRD is read,
// as r's identity (which applied it), for its kind; one that is gone is not
// kept, and one that cannot be read fails r for now (nothing in use is deleted).
func (s *RevisionState) keepWithdrawn(ctx context.Context, r *instanceState, stale apply.Inventory) (apply.Inventory, error) {
	kept := apply.Inventory{}
	r.withdrawn = nil
	var c client.Client
	for _, id := range slices.Sorted(maps.Keys(stale)) {
		meta, err := object.ParseObjMetadata(id)
		if err != nil || meta.GroupKind != contracts.CRDKind {
			continue
		}
		if c == nil {
			m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
			if err != nil {
				return nil, err
			}
			c = m.Client()
		}
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(contracts.CRDKind.WithVersion("v1"))
		if err := c.Get(ctx, client.ObjectKey{Name: meta.Name}, crd); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("failed to read CustomResourceDefinition %s, which the render dropped, to see whether instances still use it: %w", meta.Name, err)
		}
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		gk := schema.GroupKind{Group: group, Kind: kind}
		if s.contracts.ProviderOf(gk) != "" || kind == "" {
			continue
		}
		users := s.usersOf(r.key(), map[schema.GroupKind]bool{gk: true}, true)
		if len(users) == 0 {
			continue
		}
		kept[id] = stale[id]
		r.withdrawn = append(r.withdrawn, withdrawal{kind: gk, users: users})
		r.warnings = append(r.warnings, fmt.Sprintf("%s: kept CustomResourceDefinition %s, which the render dropped: %s is still used by %s",
			cairnv1.ReasonContractWithdrawn, meta.Name, gk.String(), namedSome(users)))
	}
	return kept, nil
}

// namedSome names up to maxNamedRequirers of keys, and how many more there are.
func namedSome(keys []string) string {
	named := keys[:min(len(keys), maxNamedRequirers)]
	out := strings.Join(named, ", ")
	if n := len(keys) - len(named); n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	return out
}

// failConflicts fails the instances that render the CRD of a kind another
// instance provides, naming the kind and both: the instance that provided it
// before (its status says so) goes on, the newcomers are refused; when none
// provided it, all are. It returns the instances it failed.
func (s *RevisionState) failConflicts() []*instanceState {
	var failed []*instanceState
	for _, gk := range s.contracts.Conflicts() {
		keys := s.contracts.Conflicting(gk)
		var owner string
		for _, key := range keys {
			if r := s.byKey[key]; r != nil && r.was != nil && slices.Contains(r.was.Status.Provides, gk.String()) {
				owner = key
			}
		}
		err := fmt.Errorf("the CustomResourceDefinition of %s is provided by more than one instance: %s; a kind has one provider, remove it from all but one",
			gk.String(), strings.Join(keys, ", "))
		if owner != "" {
			err = fmt.Errorf("the CustomResourceDefinition of %s is provided by %s already, and by %s: a kind has one provider, remove it from all but one",
				gk.String(), owner, strings.Join(slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == owner }), ", "))
		}
		for _, key := range keys {
			// A fast instance renders no CRD it did not apply before (mayApplyAlone): it is the owner.
			if r := s.byKey[key]; r != nil && key != owner && r.affected && r.rendered != nil && !r.fast {
				r.setFailure(outcome.NewStalled(cairnv1.ReasonContractConflict, err))
				failed = append(failed, r)
			}
		}
	}
	return failed
}

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
)

// crdKind is the kind of a CustomResourceDefinition, as inventories record it.
var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// withdrawal is a kind a provider's render no longer provides (its CRD left the
// render) while other instances still use it: the CRD is kept.
type withdrawal struct {
	kind  schema.GroupKind
	users []string // the instances that use kind, sorted
}

// withdrawnInUse finds, for each rendered provider, the kinds its status records
// as provided, its render no longer provides, no other instance provides, and
// other instances still use: those CRDs are kept (see keepWithdrawn) and the
// provider goes on providing the kinds. It returns them by instance key.
func (s *syncRun) withdrawnInUse() map[string][]schema.GroupKind {
	out := map[string][]schema.GroupKind{}
	for _, r := range s.runs {
		r.withdrawn = nil
		if r.rendered == nil || r.live == nil {
			continue
		}
		for _, gk := range parseKindNames(r.live.Status.Provides) {
			if _, provided := s.contracts.providerOf[gk]; provided || len(s.contracts.conflicts[gk]) > 0 {
				continue // still rendered, by r or by another instance
			}
			var users []string
			for _, o := range s.runs {
				if o != r && usesKinds(o, r.key(), map[schema.GroupKind]bool{gk: true}) {
					users = append(users, o.key())
				}
			}
			if len(users) > 0 {
				r.withdrawn = append(r.withdrawn, withdrawal{kind: gk, users: users})
				out[r.key()] = append(out[r.key()], gk)
			}
		}
	}
	return out
}

// keepWithdrawn sets aside, from the objects r's render dropped, the CRDs of the
// kinds r withdrew while others use them: they stay in r's inventory and are
// neither pruned nor orphaned, and r says so (ContractWithdrawn). A CRD's name
// is its plural and group, so only the CRDs of a withdrawn kind's group are read
// (as r's identity, which applied them) for their kind; a CRD that is gone is
// not kept, one that cannot be read is (nothing in use is ever deleted).
func (s *syncRun) keepWithdrawn(ctx context.Context, r *instanceRun, stale inventory) (inventory, error) {
	kept := inventory{}
	if len(r.withdrawn) == 0 {
		return kept, nil
	}
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(stale)) {
		meta, err := object.ParseObjMetadata(id)
		if err != nil || meta.GroupKind != crdKind {
			continue
		}
		_, group, _ := strings.Cut(meta.Name, ".")
		var candidates []withdrawal
		for _, w := range r.withdrawn {
			if w.kind.Group == group {
				candidates = append(candidates, w)
			}
		}
		if len(candidates) == 0 {
			continue
		}
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdKind.WithVersion("v1"))
		switch err := m.Client().Get(ctx, client.ObjectKey{Name: meta.Name}, crd); {
		case apierrors.IsNotFound(err):
			continue
		case err == nil:
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			candidates = slices.DeleteFunc(candidates, func(w withdrawal) bool { return w.kind.Kind != kind })
		}
		if len(candidates) == 0 {
			continue
		}
		kept[id] = stale[id]
		for _, w := range candidates {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: kept CustomResourceDefinition %s, which the render dropped: %s is still used by %s",
				cairnv1.ReasonContractWithdrawn, meta.Name, w.kind.String(), namedSome(w.users)))
		}
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
func (s *syncRun) failConflicts() []*instanceRun {
	var failed []*instanceRun
	for _, gk := range slices.SortedFunc(maps.Keys(s.contracts.conflicts), compareGroupKinds) {
		keys := s.contracts.conflicts[gk]
		var owner string
		for _, key := range keys {
			if r := s.byKey[key]; r != nil && r.live != nil && slices.Contains(r.live.Status.Provides, gk.String()) {
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
			if r := s.byKey[key]; r != nil && key != owner && r.affected && r.rendered != nil {
				r.setFailure(stalled(cairnv1.ReasonContractConflict, err))
				failed = append(failed, r)
			}
		}
	}
	return failed
}

package reconciler

import (
	"fmt"
	"maps"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/placement"
)

// prepare labels the rendered objects of one instance as cairn's, fixes their
// namespace by the scope of their kind (namespaced objects without one get the
// instance's, cluster-scoped ones none), and checks that each may go where it is
// placed (see placement).
func prepare(objects []*unstructured.Unstructured, mi *cairnv1.ModuleInstance, mapper meta.RESTMapper,
	pl placement.Placement, provided map[schema.GroupKind]bool) error {
	crdScopes := maps.Clone(provided)
	if crdScopes == nil {
		crdScopes = map[schema.GroupKind]bool{}
	}
	maps.Copy(crdScopes, crds.Scopes(objects))
	for _, u := range objects {
		namespaced, err := setScope(u, mi.Namespace, mapper, crdScopes)
		if err != nil {
			return err
		}
		if err := pl.Check(u, namespaced); err != nil {
			return err
		}
		setOwnerLabels(u, mi)
	}
	return nil
}

func setOwnerLabels(u *unstructured.Unstructured, mi *cairnv1.ModuleInstance) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[cairnv1.ManagedByLabel] = cairnv1.ManagedByValue
	labels[cairnv1.InstanceLabel] = cairnv1.InstanceKey(mi.Namespace, mi.Name)
	if mi.UID != "" {
		labels[cairnv1.InstanceUIDLabel] = string(mi.UID)
	}
	u.SetLabels(labels)
}

func setScope(u *unstructured.Unstructured, namespace string, mapper meta.RESTMapper,
	crds map[schema.GroupKind]bool) (bool, error) {
	gvk := u.GroupVersionKind()
	var namespaced bool
	// The cluster's scope of a kind it serves wins over any CRD's: no render can
	// declare a served kind (a ClusterRoleBinding, a CustomResourceDefinition)
	// namespaced to pass the placement of its objects.
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
	case meta.IsNoMatchError(err):
		ns, provided := crds[gvk.GroupKind()]
		if !provided {
			return false, outcome.NewStalled(cairnv1.ReasonKindNotServed,
				fmt.Errorf("%s: the cluster does not serve %s and no instance provides it (a CustomResourceDefinition in its render)",
					apply.Describe(u), gvk.String()))
		}
		namespaced = ns
	default:
		return false, outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to map kind %s: %w", apply.Describe(u), gvk.String(), err))
	}
	switch {
	case !namespaced:
		u.SetNamespace("")
	case u.GetNamespace() == "":
		u.SetNamespace(namespace)
	}
	return namespaced, nil
}

// missMemo is a RESTMapper that remembers, for one sync, the kinds the mapper
// does not serve, so that the objects of a kind not served yet (their CRD is in
// a render) ask the cluster once, not once each.
type missMemo struct {
	meta.RESTMapper
	mu     sync.Mutex
	misses map[schema.GroupVersionKind]error
}

func newMissMemo(m meta.RESTMapper) *missMemo {
	return &missMemo{RESTMapper: m, misses: map[schema.GroupVersionKind]error{}}
}

// RESTMapping is the mapper's, or the NoMatch error it gave for the kind before.
func (m *missMemo) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := gk.WithVersion(strings.Join(versions, ","))
	m.mu.Lock()
	err, missed := m.misses[key]
	m.mu.Unlock()
	if missed {
		return nil, err
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.mu.Lock()
		m.misses[key] = err
		m.mu.Unlock()
	}
	return mapping, err
}

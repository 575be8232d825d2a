package reconciler

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render"
)

// prepare labels the rendered objects of one instance as cairn's, fixes their
// namespace by the scope of their kind (namespaced objects without one get the
// instance's, cluster-scoped ones none), and checks that each may go where it is
// placed (see placement).
func prepare(objects []*unstructured.Unstructured, mi *cairnv1.ModuleInstance, mapper meta.RESTMapper,
	pl placement, provided map[schema.GroupKind]bool) error {
	crdScopes := maps.Clone(provided)
	if crdScopes == nil {
		crdScopes = map[schema.GroupKind]bool{}
	}
	maps.Copy(crdScopes, render.CRDScopes(objects))
	for _, u := range objects {
		namespaced, err := setScope(u, mi.Namespace, mapper, crdScopes)
		if err != nil {
			return err
		}
		if err := pl.check(u, namespaced); err != nil {
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
	namespaced, ok := crds[gvk.GroupKind()]
	if !ok {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			return false, stalled(cairnv1.ReasonKindNotServed,
				fmt.Errorf("%s: the cluster does not serve %s and no instance provides it (a CustomResourceDefinition in its render)",
					describe(u), gvk.String()))
		}
		if err != nil {
			return false, transient(cairnv1.ReasonApplyFailed, fmt.Errorf("%s: failed to map kind %s: %w", describe(u), gvk.String(), err))
		}
		namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
	}
	switch {
	case !namespaced:
		u.SetNamespace("")
	case u.GetNamespace() == "":
		u.SetNamespace(namespace)
	}
	return namespaced, nil
}

// describe names an object the way kubectl does: Kind/namespace/name.
func describe(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

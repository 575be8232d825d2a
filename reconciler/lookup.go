package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render"
)

// chartLookup is the `lookup` of mi's chart: reads (get and list only) of the live
// cluster as mi's identity, its ServiceAccount's (RBAC decides) or, for an instance
// that applies as cairn, within its own namespace and cluster-scoped kinds only.
// Nothing in cairn's namespace is ever read.
func (in *revisionInput) chartLookup(ctx context.Context, mi *cairnv1.ModuleInstance) render.Lookup {
	sa := in.serviceAccount(mi)
	return func(apiVersion, kind, namespace, name string) (map[string]any, error) {
		gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
		mapping, err := in.e.cluster.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, err
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			namespace = ""
		} else if err := in.lookupAllowed(mi, sa, namespace); err != nil {
			return nil, err
		}
		m, err := in.e.cluster.Manager(mi.Namespace, sa)
		if err != nil {
			return nil, err
		}
		obj, err := readObject(ctx, m.Client(), gvk, namespace, name)
		if err != nil || name != "" || mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return obj, err
		}
		return withoutNamespace(obj, in.e.opts.cairnNamespace()), nil
	}
}

// withoutNamespace drops from a list read across all namespaces the items of ns:
// what a ServiceAccount may list cluster-wide still never shows cairn's namespace.
func withoutNamespace(list map[string]any, ns string) map[string]any {
	items, _ := list["items"].([]any)
	kept := make([]any, 0, len(items))
	for _, item := range items {
		if m, ok := item.(map[string]any); ok && (&unstructured.Unstructured{Object: m}).GetNamespace() == ns {
			continue
		}
		kept = append(kept, item)
	}
	list["items"] = kept
	return list
}

// lookupAllowed refuses a read of a namespaced kind in cairn's namespace, and, for an
// instance that applies as cairn, outside its own namespace.
func (in *revisionInput) lookupAllowed(mi *cairnv1.ModuleInstance, sa, namespace string) error {
	switch {
	case namespace == in.e.opts.cairnNamespace():
		return fmt.Errorf("refused: cairn's namespace %s is never read by a chart", namespace)
	case sa == "" && namespace != mi.Namespace:
		where := "every namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return fmt.Errorf("refused: an instance without a ServiceAccount reads only its own namespace %s, not %s", mi.Namespace, where)
	}
	return nil
}

// readObject gets the object, or lists the kind (in namespace, "" for all).
func readObject(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace, name string) (map[string]any, error) {
	if name != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			return nil, err
		}
		return u.Object, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	return list.UnstructuredContent(), nil
}

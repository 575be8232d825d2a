package reconciler

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

// An instance whose CR is missing (new in Git, or deleted by hand with kubectl) may
// still have objects in the cluster from before: its inventory left with the CR,
// but the objects keep cairn's labels. Before the first apply of such an instance,
// cairn finds them by label (managed-by cairn and cairn.dev/instance=<ns>.<name>,
// whatever instance UID they carry) and takes them as the last inventory: objects
// still rendered are re-applied (and get the new CR's UID label), objects that left
// the render meanwhile are pruned within the guards, so nothing is duplicated and
// nothing is left behind. The kinds searched are those of the render, those of an
// inventory Secret the deleted CR left behind (large inventories), and
// adoptionKinds; an object of another kind that left the render while the CR was
// gone is not found (it stays, labelled, and is no longer tracked). Each kind costs
// one metadata-only LIST per sync, shared by all instances, and only when some
// instance has no CR.

// adoptionKinds are searched for every instance without a CR: the kinds modules
// render most.
var adoptionKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "PersistentVolumeClaim"}, {Version: "v1", Kind: "Namespace"},
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "batch", Version: "v1", Kind: "CronJob"}, {Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, {Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

// managedObjects is cairn's labelled objects of one kind, by instance label.
type managedObjects map[string]apply.Inventory

// adoptedInventory returns the objects of r, an instance without a CR, that are
// still in the cluster (see the comment above); empty for a new instance.
func (s *RevisionState) adoptedInventory(ctx context.Context, r *instanceState) (apply.Inventory, error) {
	left, err := s.leftInventory(ctx, r.mi)
	if err != nil {
		return nil, err
	}
	r.leftInventory = len(left) > 0
	key := s.instanceLabel(r.mi)
	out := left.Union(apply.Inventory{}) // what the deleted CR recorded, even where cairn may not list
	for _, gvk := range s.adoptionKindsOf(r, left) {
		found, err := s.listManaged(ctx, gvk)
		if err != nil {
			return nil, err
		}
		out = out.Union(found[key])
	}
	return out, nil
}

// adoptionKindsOf lists the kinds to search for r, one version per group and kind.
func (in *revisionInput) adoptionKindsOf(r *instanceState, left apply.Inventory) []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	objects := r.objects
	if r.render.res != nil { // read once rendered, before placement (settle): the kinds are the same
		objects = r.render.res.Objects
	}
	for _, u := range objects {
		kinds = append(kinds, u.GroupVersionKind())
	}
	for _, e := range left {
		if meta, err := object.ParseObjMetadata(e.ID); err == nil {
			kinds = append(kinds, meta.GroupKind.WithVersion(versionOf(e.Version)))
		}
	}
	kinds = append(kinds, adoptionKinds...)
	seen := map[schema.GroupKind]bool{}
	out := kinds[:0]
	for _, gvk := range kinds {
		if !seen[gvk.GroupKind()] {
			seen[gvk.GroupKind()] = true
			out = append(out, gvk)
		}
	}
	return out
}

func versionOf(apiVersion string) string {
	if _, v, ok := strings.Cut(apiVersion, "/"); ok {
		return v
	}
	return apiVersion
}

// leftInventory reads the inventory Secret a deleted CR of mi left behind, if any: a
// large inventory, or one the controller kept when the CR was deleted by hand.
func (s *RevisionState) leftInventory(ctx context.Context, mi *cairnv1.ModuleInstance) (apply.Inventory, error) {
	name := apply.InventorySecretName(mi)
	if names := s.listSecretNames(ctx); names != nil && !names[name] {
		return nil, nil
	}
	owner := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: mi.Namespace, Name: mi.Name}}
	owner.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: name}}
	inv, err := s.e.inventories().Load(ctx, owner)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return inv, err
}

// listSecretNames lists, once per sync and as cairn, the names of the Secrets of
// cairn's namespace (their metadata only): few instances leave an inventory Secret,
// so one LIST spares each new instance a read of a Secret that is not there (issue
// 24). It is nil when the LIST failed (it is not sent again in the sync); each
// instance then reads its own.
func (s *RevisionState) listSecretNames(ctx context.Context) map[string]bool {
	s.secretsOnce.Do(func() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := s.e.cluster.client.List(ctx, list, client.InNamespace(s.e.namespace())); err != nil {
			return
		}
		s.secretNames = make(map[string]bool, len(list.Items))
		for _, it := range list.Items {
			s.secretNames[it.Name] = true
		}
	})
	return s.secretNames
}

// listManaged lists, once per sync and as cairn, the metadata of every object of
// gvk labelled as cairn's, grouped by instance label. A kind the cluster does not
// serve, or that cairn may not list, has no objects to adopt.
func (s *RevisionState) listManaged(ctx context.Context, gvk schema.GroupVersionKind) (managedObjects, error) {
	s.managedMu.Lock() // the instances settle concurrently; each kind is listed once
	defer s.managedMu.Unlock()
	if found, ok := s.managed[gvk.GroupKind()]; ok {
		return found, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err := s.e.cluster.client.List(ctx, list, client.MatchingLabels{cairnv1.ManagedByLabel: cairnv1.ManagedByValue})
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
		list.Items = nil
	case err != nil:
		return nil, fmt.Errorf("failed to list %s to find the objects of instances without a CR: %w", gvk.Kind, err)
	}
	found := managedObjects{}
	for _, item := range list.Items {
		key := item.Labels[cairnv1.InstanceLabel]
		if key == "" {
			continue
		}
		id := object.ObjMetadata{Namespace: item.Namespace, Name: item.Name, GroupKind: gvk.GroupKind()}.String()
		if found[key] == nil {
			found[key] = apply.Inventory{}
		}
		found[key][id] = cairnv1.InventoryEntry{ID: id, Version: gvk.GroupVersion().String()}
	}
	s.managed[gvk.GroupKind()] = found
	return found, nil
}

// KeepInventoryOfDeleted keeps the inventory of mi, a ModuleInstance just deleted, in
// cairn's namespace: the controller calls it on each deletion it watches. A hand
// delete (kubectl delete) then loses nothing: the next sync re-creates the CR and
// takes every object of that inventory as its own, even those that left the render
// meanwhile and those of kinds cairn may not list. cairn's own removal clears the
// inventory before it deletes a CR, so nothing is kept for it.
func (e *Engine) KeepInventoryOfDeleted(ctx context.Context, mi *cairnv1.ModuleInstance) error {
	return e.inventories().Keep(ctx, mi)
}

// dropLeftInventory removes the inventory Secret r was adopted from once r's CR
// records its inventory inline: the CR holds it now.
func (in *revisionInput) dropLeftInventory(ctx context.Context, r *instanceReconcile) {
	inv := r.live.Status.Inventory
	if !r.leftInventory || r.failure != nil || inv == nil || inv.SecretRef != nil {
		return
	}
	if err := in.e.inventories().Remove(ctx, r.live); err != nil {
		in.e.logger(ctx).Error(err, "failed to remove the inventory kept for the deleted CR", "instance", r.key(), "revision", in.rev.SHA)
	}
}

package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
)

// deleteConcurrency bounds the deletions of one stage in flight at once.
const deleteConcurrency = 16

// deleteOrder is the reverse of the apply order, after the first stage of workloads
// and every kind not listed here (custom resources among them): services and
// config, then RBAC, then Namespaces, and CustomResourceDefinitions last. Each
// stage is gone before the next begins, so no workload outlives its config or
// identity and no custom resource outlives its definition.
var deleteOrder = []map[string]bool{
	{"Service": true, "Ingress": true, "IngressClass": true, "ConfigMap": true, "Secret": true,
		"PersistentVolumeClaim": true, "NetworkPolicy": true, "PodDisruptionBudget": true,
		"Endpoints": true, "EndpointSlice": true, "LimitRange": true, "ResourceQuota": true,
		"PriorityClass": true, "StorageClass": true, "PersistentVolume": true},
	{"ServiceAccount": true, "Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true},
	{"Namespace": true},
	{"CustomResourceDefinition": true},
}

// deleteStageOf is the stage in which u is deleted: 0 for workloads and unlisted
// kinds, else 1 + its index in deleteOrder.
func deleteStageOf(u *unstructured.Unstructured) int {
	for i, kinds := range deleteOrder {
		if kinds[u.GetKind()] {
			return i + 1
		}
	}
	return 0
}

// deleteStage deletes objects concurrently. Each live object is read first and left
// alone unless it carries cairn's managed-by label and the instance's label (and,
// when uid is given, no other instance UID label: see ownedBy); the
// DELETE is conditioned on the UID that was read, so an object re-created by someone
// else meanwhile is never deleted. It returns what it did and the objects still
// terminating (finalizers, Namespaces), which the caller waits for.
func deleteStage(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, ps *pruneSet) (
	[]ssa.ChangeSetEntry, []*unstructured.Unstructured, error) {
	var (
		mu          sync.Mutex
		entries     []ssa.ChangeSetEntry
		terminating []*unstructured.Unstructured
	)
	errs := forEachObject(objects, deleteConcurrency, func(u *unstructured.Unstructured) error {
		action, live, err := deleteOne(ctx, c, u, ps.key, ps.uid)
		if err != nil && neverApplied(ps, u, err) {
			action, err = ssa.SkippedAction, nil
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		entries = append(entries, changeSetEntry(u, action))
		if action == ssa.DeletedAction && stillTerminating(live) {
			terminating = append(terminating, u)
		}
		return nil
	})
	return entries, terminating, errors.Join(errs...)
}

// forEachObject runs fn for every object, at most n at once, and returns the errors.
func forEachObject(objects []*unstructured.Unstructured, n int, fn func(*unstructured.Unstructured) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, n)
	)
	for _, u := range objects {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(u); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

func changeSetEntry(u *unstructured.Unstructured, action ssa.Action) ssa.ChangeSetEntry {
	return ssa.ChangeSetEntry{ObjMetadata: object.UnstructuredToObjMetadata(u),
		GroupVersion: u.GroupVersionKind().GroupVersion().String(), Subject: ssautils.FmtUnstructured(u), Action: action}
}

// neverApplied reports whether err, met deleting u, only shows that u was never
// applied: its inventory entry was recorded before the apply and no apply was
// confirmed, and the kind is unknown or forbidden to the identity (a refused
// instance), so there is nothing of it to delete.
func neverApplied(ps *pruneSet, u *unstructured.Unstructured, err error) bool {
	if e, ok := ps.stale[apply.ObjectID(u)]; !ok || e.Hash != "" {
		return false
	}
	return meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}

// deleteOne deletes one object if it is this instance's; it reports Deleted only for
// an object it deleted, Skipped for one that is gone or not ours.
func deleteOne(ctx context.Context, c client.Client, u *unstructured.Unstructured, key, uid string) (ssa.Action, *unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case apierrors.IsNotFound(err):
		return ssa.SkippedAction, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s: failed to read before deleting: %w", apply.Describe(u), err)
	case !ownedBy(live, key, uid):
		return ssa.SkippedAction, nil, nil
	}
	liveUID := live.GetUID()
	err = c.Delete(ctx, live, client.Preconditions{UID: &liveUID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return ssa.SkippedAction, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s delete failed: %w", apply.Describe(u), err)
	}
	return ssa.DeletedAction, live, nil
}

// orphanObjects leaves objects in place and takes cairn's labels off those that are
// still the instance's (read first, patched on the UID that was read), so that no
// later instance of the same name adopts or prunes them. It returns how many it
// released.
func orphanObjects(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, key, uid string) (int, error) {
	var released atomic.Int32
	errs := forEachObject(objects, deleteConcurrency, func(u *unstructured.Unstructured) error {
		ok, err := orphanOne(ctx, c, u, key, uid)
		if ok {
			released.Add(1)
		}
		return err
	})
	return int(released.Load()), errors.Join(errs...)
}

func orphanOne(ctx context.Context, c client.Client, u *unstructured.Unstructured, key, uid string) (bool, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: failed to read before orphaning: %w", apply.Describe(u), err)
	case !ownedBy(live, key, uid):
		return false, nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": live.GetUID(), "labels": map[string]any{
		cairnv1.ManagedByLabel: nil, cairnv1.InstanceLabel: nil, cairnv1.InstanceUIDLabel: nil}}})
	err = c.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: failed to remove cairn's labels: %w", apply.Describe(u), err)
	}
	return true, nil
}

// ownedBy reports whether the live object is the instance's: it carries cairn's
// managed-by label and the instance label key, and, when uid is given and the object
// carries an instance UID label, that label is uid. An object labelled by a same-named
// instance that was deleted and created again elsewhere, or a forged label, is not
// the instance's. uid "" skips the UID check.
func ownedBy(live *unstructured.Unstructured, key, uid string) bool {
	l := live.GetLabels()
	if l[cairnv1.ManagedByLabel] != cairnv1.ManagedByValue || l[cairnv1.InstanceLabel] != key {
		return false
	}
	liveUID, labelled := l[cairnv1.InstanceUIDLabel]
	return uid == "" || !labelled || liveUID == uid
}

// stillTerminating tells whether a deleted object may linger: it has finalizers, or it
// is a Namespace (whose contents are deleted first) or a Pod (graceful deletion).
// Every other object is gone when its DELETE returns.
func stillTerminating(live *unstructured.Unstructured) bool {
	core := live.GroupVersionKind().Group == ""
	return len(live.GetFinalizers()) > 0 || (core && (live.GetKind() == "Namespace" || live.GetKind() == "Pod"))
}

// waitGone polls until every object is gone, with backoff, or the timeout.
func waitGone(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	interval := apply.HealthFirstInterval
	for len(objects) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d object(s) still terminating after %s, e.g. %s", len(objects), timeout, apply.Describe(objects[0]))
		case <-time.After(interval):
		}
		interval = min(interval*2, apply.HealthMaxInterval)
		var left []*unstructured.Unstructured
		for _, u := range objects {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: failed to read while waiting for deletion: %w", apply.Describe(u), err)
			}
			left = append(left, u)
		}
		objects = left
	}
	return nil
}

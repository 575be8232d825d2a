package apply

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
	"cairn.dev/cairn/reconciler/outcome"
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
// when uid is given, no other instance UID label: see OwnedBy); the
// DELETE is conditioned on the UID that was read, so an object re-created by someone
// else meanwhile is never deleted. It returns what it did and the objects still
// terminating (finalizers, Namespaces), which the caller waits for.
func deleteStage(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, stale Inventory, key, uid string) (
	[]ssa.ChangeSetEntry, []*unstructured.Unstructured, error) {
	var (
		mu          sync.Mutex
		entries     []ssa.ChangeSetEntry
		terminating []*unstructured.Unstructured
	)
	errs := ForEach(objects, deleteConcurrency, func(u *unstructured.Unstructured) error {
		action, live, err := DeleteOne(ctx, c, u, key, uid)
		if err != nil && neverApplied(stale, u, err) {
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

// ForEach runs fn for every object, at most n at once, and returns the errors.
func ForEach(objects []*unstructured.Unstructured, n int, fn func(*unstructured.Unstructured) error) []error {
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
func neverApplied(stale Inventory, u *unstructured.Unstructured, err error) bool {
	if e, ok := stale[ObjectID(u)]; !ok || e.Hash != "" {
		return false
	}
	return meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}

// DeleteOne deletes one object if it is this instance's; it reports Deleted only for
// an object it deleted, Skipped for one that is gone or not ours.
func DeleteOne(ctx context.Context, c client.Client, u *unstructured.Unstructured, key, uid string) (ssa.Action, *unstructured.Unstructured, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case apierrors.IsNotFound(err):
		return ssa.SkippedAction, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s: failed to read before deleting: %w", Describe(u), err)
	case !OwnedBy(live, key, uid):
		return ssa.SkippedAction, nil, nil
	}
	liveUID := live.GetUID()
	err = c.Delete(ctx, live, client.Preconditions{UID: &liveUID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return ssa.SkippedAction, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s delete failed: %w", Describe(u), err)
	}
	return ssa.DeletedAction, live, nil
}

// OrphanObjects leaves objects in place and takes cairn's labels off those that are
// still the instance's (read first, patched on the UID that was read), so that no
// later instance of the same name adopts or prunes them. It returns how many it
// released.
func OrphanObjects(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, key, uid string) (int, error) {
	var released atomic.Int32
	errs := ForEach(objects, deleteConcurrency, func(u *unstructured.Unstructured) error {
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
		return false, fmt.Errorf("%s: failed to read before orphaning: %w", Describe(u), err)
	case !OwnedBy(live, key, uid):
		return false, nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": live.GetUID(), "labels": map[string]any{
		cairnv1.ManagedByLabel: nil, cairnv1.InstanceLabel: nil, cairnv1.InstanceUIDLabel: nil}}})
	err = c.Patch(ctx, live, client.RawPatch(types.MergePatchType, patch))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: failed to remove cairn's labels: %w", Describe(u), err)
	}
	return true, nil
}

// OwnedBy reports whether the live object is the instance's: it carries cairn's
// managed-by label and the instance label key, and, when uid is given and the object
// carries an instance UID label, that label is uid. An object labelled by a same-named
// instance that was deleted and created again elsewhere, or a forged label, is not
// the instance's. uid "" skips the UID check.
func OwnedBy(live *unstructured.Unstructured, key, uid string) bool {
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

// WaitGone polls until every object is gone, with backoff, or the timeout.
func WaitGone(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	interval := HealthFirstInterval
	for len(objects) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d object(s) still terminating after %s, e.g. %s", len(objects), timeout, Describe(objects[0]))
		case <-time.After(interval):
		}
		interval = min(interval*2, HealthMaxInterval)
		var left []*unstructured.Unstructured
		for _, u := range objects {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: failed to read while waiting for deletion: %w", Describe(u), err)
			}
			left = append(left, u)
		}
		objects = left
	}
	return nil
}

// DeleteStale deletes the stale objects of the instance labelled key (and, when uid
// is given, of that UID: see OwnedBy) in reverse apply order (see deleteStages), each
// stage gone before the next, waiting at most timeout for each; only objects that
// still carry the instance's labels are deleted (see deleteStage). It reports what it
// deleted and what it skipped.
func DeleteStale(ctx context.Context, m *ssa.ResourceManager, stale Inventory, key, uid string, timeout time.Duration) (*ssa.ChangeSet, error) {
	objects, err := stale.Objects()
	if err != nil {
		return nil, outcome.NewStalled(cairnv1.ReasonPruneFailed, err)
	}
	all := ssa.NewChangeSet()
	for _, stage := range deleteStages(objects) {
		entries, terminating, err := deleteStage(ctx, m.Client(), stage, stale, key, uid)
		all.Append(entries)
		if err != nil {
			return all, outcome.Classify(cairnv1.ReasonPruneFailed, err)
		}
		if err := WaitGone(ctx, m.Client(), terminating, timeout); err != nil {
			return all, outcome.NewTransient(cairnv1.ReasonPruneFailed, fmt.Errorf("failed to wait for deletion: %w", err))
		}
	}
	return all, nil
}

// deleteStages groups objects in reverse apply order (see deleteStage for the kinds).
func deleteStages(objects []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	stages := make([][]*unstructured.Unstructured, len(deleteOrder)+1)
	for _, u := range objects {
		stages[deleteStageOf(u)] = append(stages[deleteStageOf(u)], u)
	}
	out := stages[:0]
	for _, s := range stages {
		if len(s) > 0 {
			out = append(out, s)
		}
	}
	return out
}

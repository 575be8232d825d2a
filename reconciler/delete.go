package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// deleteConcurrency bounds the deletions of one stage in flight at once.
const deleteConcurrency = 16

// deleteStage deletes objects concurrently. Each live object is read first and left
// alone unless it carries cairn's managed-by label and the instance's label (and,
// when uid is given, no other instance UID label: see ownedBy); the
// DELETE is conditioned on the UID that was read, so an object re-created by someone
// else meanwhile is never deleted. It returns what it did and the objects still
// terminating (finalizers, Namespaces), which the caller waits for.
func deleteStage(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, key, uid string) (
	[]ssa.ChangeSetEntry, []*unstructured.Unstructured, error) {
	var (
		mu          sync.Mutex
		entries     []ssa.ChangeSetEntry
		terminating []*unstructured.Unstructured
		errs        []error
		wg          sync.WaitGroup
		sem         = make(chan struct{}, deleteConcurrency)
	)
	for _, u := range objects {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			action, live, err := deleteOne(ctx, c, u, key, uid)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			entries = append(entries, ssa.ChangeSetEntry{ObjMetadata: object.UnstructuredToObjMetadata(u),
				GroupVersion: u.GroupVersionKind().GroupVersion().String(), Subject: ssautils.FmtUnstructured(u), Action: action})
			if action == ssa.DeletedAction && stillTerminating(live) {
				terminating = append(terminating, u)
			}
		}()
	}
	wg.Wait()
	return entries, terminating, errors.Join(errs...)
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
		return "", nil, fmt.Errorf("%s: failed to read before deleting: %w", describe(u), err)
	case !ownedBy(live, key, uid):
		return ssa.SkippedAction, nil, nil
	}
	liveUID := live.GetUID()
	err = c.Delete(ctx, live, client.Preconditions{UID: &liveUID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return ssa.SkippedAction, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("%s delete failed: %w", describe(u), err)
	}
	return ssa.DeletedAction, live, nil
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
// is a Namespace (whose contents are deleted first).
func stillTerminating(live *unstructured.Unstructured) bool {
	return len(live.GetFinalizers()) > 0 || (live.GetKind() == "Namespace" && live.GroupVersionKind().Group == "")
}

// waitGone polls until every object is gone, with backoff, or the timeout.
func waitGone(ctx context.Context, c client.Client, objects []*unstructured.Unstructured, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	interval := healthFirstInterval
	for len(objects) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d object(s) still terminating after %s, e.g. %s", len(objects), timeout, describe(objects[0]))
		case <-time.After(interval):
		}
		interval = min(interval*2, healthMaxInterval)
		var left []*unstructured.Unstructured
		for _, u := range objects {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(u), live)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("%s: failed to read while waiting for deletion: %w", describe(u), err)
			}
			left = append(left, u)
		}
		objects = left
	}
	return nil
}

package apply

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// WatchedKinds are the kinds whose health a HealthWatch serves: the workloads, whose
// apply answer is not Current until their controller has seen it. Every other kind is
// Current as applied or is read by a GET as before.
var WatchedKinds = []schema.GroupKind{
	{Group: "apps", Kind: "Deployment"},
	{Group: "apps", Kind: "StatefulSet"},
	{Group: "apps", Kind: "DaemonSet"},
}

// HealthWatch serves the health waits of workloads from one watch per kind, opened on
// the first wait that needs it and kept for the process's life, instead of a GET of
// each object per poll (docs/architecture.md, step 15: a one-object change then sends
// no request for its health). It watches, as cairn itself, only the objects cairn
// labels (cairn.dev/instance) and keeps of each its identity, generation, the spec
// without its pod template, and the status: what kstatus reads.
//
// A wait takes an object's copy from the watch only when it is the applied object (the
// same UID as the apply's answer, which the instance's own identity got) at its applied
// generation or later, so the watch never shows an instance anything of another's; an
// object the watch cannot serve (another kind, a kind cairn may not list, a copy not yet
// seen) is read by a GET as before. A nil *HealthWatch serves nothing.
type HealthWatch struct {
	ctx    context.Context
	client dynamic.Interface
	mapper meta.RESTMapper

	mu    sync.Mutex
	kinds map[schema.GroupKind]*watchedKind
}

// watchedKind is the watch of one kind. ready is closed once the watch is started or
// found impossible (informer nil: cairn may not list the kind, or it is not served).
type watchedKind struct {
	ready    chan struct{}
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]bool // namespace/name -> the waits to wake
}

// NewHealthWatch returns a watch of the cluster of config whose watches run until ctx
// ends.
func NewHealthWatch(ctx context.Context, config *rest.Config, mapper meta.RESTMapper) (*HealthWatch, error) {
	dc, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	return &HealthWatch{ctx: ctx, client: dc, mapper: mapper, kinds: map[schema.GroupKind]*watchedKind{}}, nil
}

// kind returns the watch of gk, starting it on the first call; nil when gk is not one
// of WatchedKinds or cannot be watched.
func (w *HealthWatch) kind(ctx context.Context, gk schema.GroupKind) *watchedKind {
	if w == nil || !watched(gk) {
		return nil
	}
	w.mu.Lock()
	k, ok := w.kinds[gk]
	if !ok {
		k = &watchedKind{ready: make(chan struct{}), waiters: map[string]map[chan struct{}]bool{}}
		w.kinds[gk] = k
	}
	w.mu.Unlock()
	if !ok {
		w.start(ctx, gk, k)
	}
	select {
	case <-k.ready:
	case <-ctx.Done():
		return nil
	}
	if k.informer == nil {
		return nil
	}
	return k
}

func watched(gk schema.GroupKind) bool {
	for _, w := range WatchedKinds {
		if w == gk {
			return true
		}
	}
	return false
}

// start opens the watch of gk after one LIST of a single object has shown that cairn
// may list the kind; a denial or a kind the cluster does not serve leaves it unwatched
// for good, any other error until the next wait asks again.
func (w *HealthWatch) start(ctx context.Context, gk schema.GroupKind, k *watchedKind) {
	defer close(k.ready)
	mapping, err := w.mapper.RESTMapping(gk)
	if err != nil {
		return // not served: the wait reads by GET, which says so
	}
	selector := func(o *metav1.ListOptions) { o.LabelSelector = cairnv1.InstanceLabel }
	probe := metav1.ListOptions{Limit: 1}
	selector(&probe)
	if _, err := w.client.Resource(mapping.Resource).List(ctx, probe); err != nil {
		if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			w.mu.Lock()
			delete(w.kinds, gk) // try again on a later wait
			w.mu.Unlock()
		}
		return
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(w.client, mapping.Resource, metav1.NamespaceAll, 0,
		cache.Indexers{}, selector).Informer()
	_ = inf.SetTransform(healthView)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.wake,
		UpdateFunc: func(_, obj any) { k.wake(obj) },
		DeleteFunc: k.wake,
	})
	go inf.RunWithContext(w.ctx)
	k.informer = inf
}

// healthView keeps what kstatus reads of an object: its kind and identity, the spec
// without pod templates (the bulk of a workload, and where values may be written
// inline), and the status.
func healthView(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	view := &unstructured.Unstructured{Object: map[string]any{}}
	view.SetAPIVersion(u.GetAPIVersion())
	view.SetKind(u.GetKind())
	view.SetNamespace(u.GetNamespace())
	view.SetName(u.GetName())
	view.SetUID(u.GetUID())
	view.SetGeneration(u.GetGeneration())
	view.SetResourceVersion(u.GetResourceVersion())
	view.SetDeletionTimestamp(u.GetDeletionTimestamp())
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		kept := make(map[string]any, len(spec))
		for k, v := range spec {
			if k != "template" && k != "volumeClaimTemplates" {
				kept[k] = v
			}
		}
		view.Object["spec"] = kept
	}
	if status, ok := u.Object["status"]; ok {
		view.Object["status"] = status
	}
	return view, nil
}

// wake wakes the waits of obj.
func (k *watchedKind) wake(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for ch := range k.waiters[key] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}

// healthWaiter is one wait's registration with the watch: woken (a channel of one)
// by an event of any object it watches.
type healthWaiter struct {
	woken   chan struct{}
	watched map[string]*watchedKind // object id -> its kind's watch
}

// waiter registers a wait for objects with the watches of their kinds (started as
// needed); done unregisters it.
func (w *HealthWatch) waiter(ctx context.Context, objects []*unstructured.Unstructured) *healthWaiter {
	h := &healthWaiter{woken: make(chan struct{}, 1), watched: map[string]*watchedKind{}}
	for _, u := range objects {
		k := w.kind(ctx, u.GroupVersionKind().GroupKind())
		if k == nil {
			continue
		}
		h.watched[ObjectID(u)] = k
		key := cache.NewObjectName(u.GetNamespace(), u.GetName()).String()
		k.mu.Lock()
		if k.waiters[key] == nil {
			k.waiters[key] = map[chan struct{}]bool{}
		}
		k.waiters[key][h.woken] = true
		k.mu.Unlock()
	}
	return h
}

func (h *healthWaiter) done(objects []*unstructured.Unstructured) {
	for _, u := range objects {
		k := h.watched[ObjectID(u)]
		if k == nil {
			continue
		}
		key := cache.NewObjectName(u.GetNamespace(), u.GetName()).String()
		k.mu.Lock()
		delete(k.waiters[key], h.woken)
		if len(k.waiters[key]) == 0 {
			delete(k.waiters, key)
		}
		k.mu.Unlock()
	}
}

// polls says whether any of objects is not served by the watch.
func (h *healthWaiter) polls(objects []*unstructured.Unstructured) bool {
	for _, u := range objects {
		if h.watched[ObjectID(u)] == nil {
			return true
		}
	}
	return false
}

// cached returns the watch's copy of u when it is u at its generation or later (nil:
// the watch does not serve u, or has not seen that yet).
func (h *healthWaiter) cached(u *unstructured.Unstructured) *unstructured.Unstructured {
	k := h.watched[ObjectID(u)]
	if k == nil {
		return nil
	}
	obj, ok, err := k.informer.GetStore().GetByKey(cache.NewObjectName(u.GetNamespace(), u.GetName()).String())
	if err != nil || !ok {
		return nil
	}
	c, ok := obj.(*unstructured.Unstructured)
	if !ok || c.GetUID() != u.GetUID() || c.GetGeneration() < u.GetGeneration() {
		return nil
	}
	return c
}

package apply

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// watchedKinds are the kinds whose health a HealthWatch serves: the workloads, whose
// apply answer is not Current until their controller has seen it. Every other kind is
// Current as applied or is read by a GET as before. Each is watched through client-go's
// typed informer in protobuf, whose decoding costs a fraction of JSON's into maps.
var watchedKinds = map[schema.GroupKind]kindWatch{
	{Group: "apps", Kind: "Deployment"}: {gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"),
		resource: "deployments", informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().Deployments().Informer()
		}},
	{Group: "apps", Kind: "StatefulSet"}: {gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		resource: "statefulsets", informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().StatefulSets().Informer()
		}},
	{Group: "apps", Kind: "DaemonSet"}: {gvk: appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		resource: "daemonsets", informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().DaemonSets().Informer()
		}},
}

// kindWatch is how one of watchedKinds is watched: its version, its resource and its
// informer of a factory.
type kindWatch struct {
	gvk      schema.GroupVersionKind
	resource string
	informer func(informers.SharedInformerFactory) cache.SharedIndexInformer
}

// HealthWatch serves the health waits of workloads from one watch per kind, opened on
// the first wait that needs it and kept for the process's life, instead of a GET of
// each object per poll (docs/architecture.md, step 15: a one-object change then sends
// no request for its health). It watches, as cairn itself, only the objects cairn
// labels (cairn.dev/instance) and keeps of each its identity, generation, the spec
// without its pod template, and the status: what kstatus reads.
//
// A wait takes an object's copy from the watch only when it is the applied object (the
// same UID as the apply's answer, which the instance's own identity got) at the apply's
// resourceVersion or later, so the watch never shows an instance anything of
// another's, nor a status older than its apply's; an object the watch cannot serve
// (another kind, a kind cairn may not list and watch, a copy not yet seen) is read by
// a GET as before. A nil *HealthWatch serves nothing.
type HealthWatch struct {
	ctx     context.Context
	client  kubernetes.Interface
	factory informers.SharedInformerFactory

	mu    sync.Mutex
	kinds map[schema.GroupKind]*watchedKind
}

// watchedKind is the watch of one kind. ready is closed once the watch is started or
// found impossible (informer nil: cairn may not list the kind, or it is not served).
type watchedKind struct {
	gvk      schema.GroupVersionKind
	ready    chan struct{}
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]bool // namespace/name -> the waits to wake
}

// selectCairns keeps a LIST or WATCH to the objects cairn labels.
func selectCairns(o *metav1.ListOptions) { o.LabelSelector = cairnv1.InstanceLabel }

// NewHealthWatch returns a watch of the cluster of config whose watches run until ctx
// ends.
func NewHealthWatch(ctx context.Context, config *rest.Config) (*HealthWatch, error) {
	cfg := rest.CopyConfig(config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(selectCairns))
	return &HealthWatch{ctx: ctx, client: cs, factory: f, kinds: map[schema.GroupKind]*watchedKind{}}, nil
}

// kind returns the watch of gk, starting it on the first call; nil when gk is not one
// of watchedKinds or cannot be watched.
func (w *HealthWatch) kind(ctx context.Context, gk schema.GroupKind) *watchedKind {
	kw, ok := watchedKinds[gk]
	if w == nil || !ok {
		return nil
	}
	w.mu.Lock()
	k, started := w.kinds[gk]
	if !started {
		k = &watchedKind{gvk: kw.gvk, ready: make(chan struct{}), waiters: map[string]map[chan struct{}]bool{}}
		w.kinds[gk] = k
	}
	w.mu.Unlock()
	if !started {
		w.start(ctx, gk, kw, k)
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

// start opens the watch of gk once the API server has said that cairn may list and
// watch the kind cluster-wide (a SelfSubjectAccessReview of each verb, which any
// identity may ask): a denial leaves the kind unwatched for the process's life, an
// error until the next wait asks again.
func (w *HealthWatch) start(ctx context.Context, gk schema.GroupKind, kw kindWatch, k *watchedKind) {
	defer close(k.ready)
	for _, verb := range []string{"list", "watch"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gk.Group, Resource: kw.resource}}}
		got, err := w.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			w.mu.Lock()
			delete(w.kinds, gk) // try again on a later wait
			w.mu.Unlock()
			return
		}
		if !got.Status.Allowed {
			return
		}
	}
	w.mu.Lock() // the factory's informers are made and started one at a time
	defer w.mu.Unlock()
	inf := kw.informer(w.factory)
	_ = inf.SetTransform(healthView)
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.wake,
		UpdateFunc: func(_, obj any) { k.wake(obj) },
		DeleteFunc: k.wake,
	})
	w.factory.Start(w.ctx.Done())
	k.informer = inf
}

// healthView keeps what kstatus reads of a workload: its identity, generation, spec
// without pod templates (the bulk of a workload, and where values may be written
// inline) and status. It changes the object the watch has just decoded, as client-go
// allows a transform to.
func healthView(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *appsv1.StatefulSet:
		o.Spec.Template, o.Spec.VolumeClaimTemplates = corev1.PodTemplateSpec{}, nil
	case *appsv1.DaemonSet:
		o.Spec.Template = corev1.PodTemplateSpec{}
	default:
		return obj, nil
	}
	m := obj.(metav1.Object)
	m.SetManagedFields(nil)
	m.SetAnnotations(nil)
	m.SetLabels(nil)
	m.SetOwnerReferences(nil)
	return obj, nil
}

// storeKey is u's key in a watch's store and among its waiters, as the informer's
// own key function gives it (namespace/name).
func storeKey(u *unstructured.Unstructured) string {
	return cache.NewObjectName(u.GetNamespace(), u.GetName()).String()
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
		key := storeKey(u)
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
		key := storeKey(u)
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

// cached returns the watch's copy of u, as kstatus reads it, when it is u (its UID) at
// its resourceVersion or later (nil: the watch does not serve u, or has not seen that
// yet).
func (h *healthWaiter) cached(u *unstructured.Unstructured) *unstructured.Unstructured {
	k := h.watched[ObjectID(u)]
	if k == nil {
		return nil
	}
	obj, ok, err := k.informer.GetStore().GetByKey(storeKey(u))
	if err != nil || !ok {
		return nil
	}
	// The resourceVersion, not the generation, tells a copy older than u (a watch that
	// fell behind): a status moves without a new generation (a replica lost), and a
	// copy at u's resourceVersion or later has u's generation or a later one.
	m, ok := obj.(metav1.Object)
	if !ok || m.GetUID() != u.GetUID() {
		return nil
	}
	if newer, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), u.GetResourceVersion()); err != nil || newer < 0 {
		return nil
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	c := &unstructured.Unstructured{Object: fields}
	c.SetGroupVersionKind(k.gvk) // a typed informer's objects carry no kind
	return c
}

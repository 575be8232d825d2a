package apply

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"cairn.dev/cairn/test/harness"
)

var deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// webDeployment is a Deployment of one replica named name in ns, with image.
func webDeployment(ns, name, image string) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	return obj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
		"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": image, "env": []any{
				map[string]any{"name": "TOKEN", "value": "inline-value"}}}}}},
	}})
}

// watchCluster is a client of the shared control plane that counts its GETs, a
// namespace of t's own, and a health watch of config (the admin's when nil) that ends
// with the test.
func watchCluster(t *testing.T, config *rest.Config) (client.Client, *atomic.Int32, string, *HealthWatch) {
	t.Helper()
	hc := harness.ForTest(t)
	wc, err := client.NewWithWatch(hc.RESTConfig, client.Options{})
	if err != nil {
		t.Fatalf("failed to create a client: %v", err)
	}
	gets := &atomic.Int32{}
	c := interceptor.NewClient(wc, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
	})
	if config == nil {
		config = hc.RESTConfig
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := NewHealthWatch(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	return c, gets, hc.Namespace(t), w
}

// TestAHealthWatchServesAWorkloadsWaitWithoutAGet: a Deployment cairn labels is not
// Current as applied; the wait takes it from the watch once its controller and the
// kwok node have rolled it out, with no GET, and again after a change of its image
// (a new generation, which the watch's older copy does not stand for). A Deployment
// without cairn's labels is not in the watch: its wait reads it by GET, as before.
func TestAHealthWatchServesAWorkloadsWaitWithoutAGet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c, gets, ns, w := watchCluster(t, nil)

	web := labelled(webDeployment(ns, "web", "example.com/web:1"), "uid-1")
	rep, err := Objects(ctx, manager(c), []*unstructured.Unstructured{web}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(NotCurrent(rep.Live)).To(HaveLen(1), "not Current as applied")
	gets.Store(0)
	g.Expect(WaitHealthy(ctx, c, w, rep.Live, 90*time.Second)).To(Succeed())
	g.Expect(gets.Load()).To(BeZero(), "the watch served the wait")

	changed := labelled(webDeployment(ns, "web", "example.com/web:2"), "uid-1")
	rep, err = Objects(ctx, manager(c), []*unstructured.Unstructured{changed}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Live[0].GetGeneration()).To(BeEquivalentTo(2))
	g.Expect(WaitHealthy(ctx, c, w, rep.Live, 90*time.Second)).To(Succeed())
	g.Expect(gets.Load()).To(BeZero(), "the watch served the wait of the new generation")
	k := w.kind(ctx, deploymentKind)
	g.Expect(k).NotTo(BeNil())
	obj, ok, err := k.informer.GetStore().GetByKey(ns + "/web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	kept := obj.(*appsv1.Deployment)
	g.Expect(kept.Generation).To(BeEquivalentTo(2))
	g.Expect(kept.Spec.Template).To(BeZero(), "the pod template (and its inline values) is not kept")
	g.Expect(kept.ManagedFields).To(BeEmpty())
	k.mu.Lock()
	g.Expect(k.waiters).To(BeEmpty(), "each wait unregisters")
	k.mu.Unlock()

	other := webDeployment(ns, "other", "example.com/web:1") // not cairn's
	rep, err = Objects(ctx, manager(c), []*unstructured.Unstructured{other}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(WaitHealthy(ctx, c, w, rep.Live, 90*time.Second)).To(Succeed())
	g.Expect(gets.Load()).To(BeNumerically(">", 0), "an object the watch does not hold is read by GET")
	_, ok, _ = k.informer.GetStore().GetByKey(ns + "/other")
	g.Expect(ok).To(BeFalse(), "the watch holds only the objects cairn labels")
}

// TestAHealthWatchCairnMayNotListPolls: where cairn may not list and watch workloads
// (its identity here has no rights at all), the watch serves nothing and for good; the
// wait reads by GET and ends as before.
func TestAHealthWatchCairnMayNotListPolls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := rest.CopyConfig(harness.ForTest(t).RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "cairn-test-nobody"}
	c, gets, ns, w := watchCluster(t, cfg)

	web := labelled(webDeployment(ns, "web", "example.com/web:1"), "uid-1")
	rep, err := Objects(ctx, manager(c), []*unstructured.Unstructured{web}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	gets.Store(0)
	g.Expect(WaitHealthy(ctx, c, w, rep.Live, 90*time.Second)).To(Succeed())
	g.Expect(gets.Load()).To(BeNumerically(">", 0), "read by GET")
	g.Expect(w.kind(ctx, deploymentKind)).To(BeNil())
	w.mu.Lock()
	defer w.mu.Unlock()
	g.Expect(w.kinds).To(HaveKey(deploymentKind), "a denial is kept: the kind is not probed again")
}

// TestAWaitTakesOnlyTheAppliedObjectFromTheWatch: the watch's copy stands for the
// applied object only with its UID (the instance's own apply answered it) at its
// resourceVersion or later (a status moves without a generation, and a later
// resourceVersion is never an older generation); anything else is read by GET.
func TestAWaitTakesOnlyTheAppliedObjectFromTheWatch(t *testing.T) {
	applied := deployment("stale")
	applied.SetUID("uid-applied")
	applied.SetGeneration(2)
	applied.SetResourceVersion("100")
	copyOf := func(uid string, generation int64, rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: types.UID(uid),
			Generation: generation, ResourceVersion: rv}, Status: appsv1.DeploymentStatus{ObservedGeneration: generation}}
	}
	for _, tc := range []struct {
		name  string
		store *appsv1.Deployment
		taken bool
	}{
		{name: "the applied object", store: copyOf("uid-applied", 2, "100"), taken: true},
		{name: "its status written since", store: copyOf("uid-applied", 2, "105"), taken: true},
		{name: "a later generation", store: copyOf("uid-applied", 3, "110"), taken: true},
		{name: "an older generation", store: copyOf("uid-applied", 1, "90")},
		{name: "an older status of the applied generation", store: copyOf("uid-applied", 2, "99")},
		{name: "no resourceVersion", store: copyOf("uid-applied", 2, "")},
		{name: "another object of the same name", store: copyOf("uid-other", 2, "120")},
		{name: "not seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			k := &watchedKind{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"),
				informer: cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{})}
			if tc.store != nil {
				g.Expect(k.informer.GetStore().Add(tc.store)).To(Succeed())
			}
			h := &healthWaiter{watched: map[string]*watchedKind{ObjectID(applied): k}}
			got := h.cached(applied)
			if !tc.taken {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.GroupVersionKind()).To(Equal(applied.GroupVersionKind()))
			g.Expect(got.GetUID()).To(Equal(tc.store.UID))
			g.Expect(got.GetGeneration()).To(Equal(tc.store.Generation))
			observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
			g.Expect(observed).To(Equal(tc.store.Generation), "kstatus reads the status as the watch has it")
		})
	}
}

// servedWatch is a health watch whose Deployment watch holds objects, as its
// informer would after their events, without running.
func servedWatch(objects ...*appsv1.Deployment) (*HealthWatch, error) {
	k := &watchedKind{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), ready: make(chan struct{}),
		waiters:  map[string]map[chan struct{}]bool{},
		informer: cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{})}
	close(k.ready)
	for _, d := range objects {
		if err := k.informer.GetStore().Add(d); err != nil {
			return nil, err
		}
	}
	return &HealthWatch{kinds: map[schema.GroupKind]*watchedKind{deploymentKind: k}}, nil
}

// TestAWaitReadsWhatTheWatchSawBeforeItRegistered: the Deployment became Current
// after its apply answered but before the wait registered with the watch, so no event
// of it is to come; the wait reads the watch's copy at once, sends no GET, and does not
// sleep until its first poll (HealthMaxInterval, longer than this wait).
func TestAWaitReadsWhatTheWatchSawBeforeItRegistered(t *testing.T) {
	g := NewWithT(t)
	applied := deployment("stale")
	applied.SetUID("uid-applied")
	applied.SetResourceVersion("100")
	two := int32(2)
	rolledOut := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-applied", Generation: 1, ResourceVersion: "104"},
		Spec:       appsv1.DeploymentSpec{Replicas: &two},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
	w, err := servedWatch(rolledOut)
	g.Expect(err).NotTo(HaveOccurred())
	var gets atomic.Int32
	c := countingClient(&gets)

	start := time.Now()
	g.Expect(WaitHealthy(context.Background(), c, w, []*unstructured.Unstructured{applied}, HealthMaxInterval/2)).To(Succeed())
	g.Expect(time.Since(start)).To(BeNumerically("<", HealthFirstInterval))
	g.Expect(gets.Load()).To(BeZero())
	g.Expect(w.kinds[deploymentKind].waiters).To(BeEmpty(), "the wait unregistered")
}

// TestHealthView keeps what kstatus reads of a workload and drops the pod templates,
// managedFields, labels and annotations.
func TestHealthView(t *testing.T) {
	g := NewWithT(t)
	replicas := int32(2)
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1",
		Env: []corev1.EnvVar{{Name: "TOKEN", Value: "inline-value"}}}}}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", Generation: 3,
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "cairn"}}},
		Spec:   appsv1.DeploymentSpec{Replicas: &replicas, Template: template},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2},
	}
	view, err := healthView(d)
	g.Expect(err).NotTo(HaveOccurred())
	v := view.(*appsv1.Deployment)
	g.Expect(v.UID).To(BeEquivalentTo("uid-1"))
	g.Expect(v.Generation).To(BeEquivalentTo(3))
	g.Expect(v.Labels).To(BeEmpty())
	g.Expect(v.Annotations).To(BeEmpty())
	g.Expect(v.ManagedFields).To(BeEmpty())
	g.Expect(v.Spec.Template).To(BeZero())
	g.Expect(*v.Spec.Replicas).To(BeEquivalentTo(2))
	g.Expect(v.Status).To(Equal(appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2}))

	s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: template,
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	_, _ = healthView(s)
	g.Expect(s.Spec.Template).To(BeZero())
	g.Expect(s.Spec.VolumeClaimTemplates).To(BeEmpty())
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: template}}
	_, _ = healthView(ds)
	g.Expect(ds.Spec.Template).To(BeZero())
}

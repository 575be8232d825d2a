package apply

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
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
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := NewHealthWatch(ctx, config, mapper)
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
	kept := obj.(*unstructured.Unstructured)
	g.Expect(kept.GetGeneration()).To(BeEquivalentTo(2))
	_, hasTemplate, _ := unstructured.NestedFieldNoCopy(kept.Object, "spec", "template")
	g.Expect(hasTemplate).To(BeFalse(), "the pod template (and its inline values) is not kept")

	other := webDeployment(ns, "other", "example.com/web:1") // not cairn's
	rep, err = Objects(ctx, manager(c), []*unstructured.Unstructured{other}, Inventory{}, digestKey, time.Minute, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(WaitHealthy(ctx, c, w, rep.Live, 90*time.Second)).To(Succeed())
	g.Expect(gets.Load()).To(BeNumerically(">", 0), "an object the watch does not hold is read by GET")
	_, ok, _ = k.informer.GetStore().GetByKey(ns + "/other")
	g.Expect(ok).To(BeFalse(), "the watch holds only the objects cairn labels")
}

// TestAHealthWatchCairnMayNotListPolls: where cairn may not list workloads (its
// identity here has no rights at all), the watch serves nothing and for good; the
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
// generation or later; anything else is read by GET.
func TestAWaitTakesOnlyTheAppliedObjectFromTheWatch(t *testing.T) {
	applied := deployment("stale")
	applied.SetUID("uid-applied")
	applied.SetGeneration(2)
	copyOf := func(uid string, generation int64) *unstructured.Unstructured {
		u := deployment("current")
		u.SetUID(types.UID(uid))
		u.SetGeneration(generation)
		return u
	}
	for _, tc := range []struct {
		name  string
		store *unstructured.Unstructured
		taken bool
	}{
		{name: "the applied generation", store: copyOf("uid-applied", 2), taken: true},
		{name: "a later generation", store: copyOf("uid-applied", 3), taken: true},
		{name: "an older generation", store: copyOf("uid-applied", 1)},
		{name: "another object of the same name", store: copyOf("uid-other", 2)},
		{name: "not seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			k := &watchedKind{informer: cache.NewSharedIndexInformer(&cache.ListWatch{}, &unstructured.Unstructured{}, 0, cache.Indexers{})}
			if tc.store != nil {
				g.Expect(k.informer.GetStore().Add(tc.store)).To(Succeed())
			}
			h := &healthWaiter{watched: map[string]*watchedKind{ObjectID(applied): k}}
			got := h.cached(applied)
			if !tc.taken {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).To(Equal(tc.store))
		})
	}
}

// TestHealthView keeps what kstatus reads and drops the pod templates.
func TestHealthView(t *testing.T) {
	g := NewWithT(t)
	u := webDeployment("ns", "web", "example.com/web:1")
	u.SetUID("uid-1")
	u.SetGeneration(3)
	u.SetLabels(map[string]string{"a": "b"})
	u.Object["status"] = map[string]any{"observedGeneration": int64(3), "replicas": int64(1)}
	view, err := healthView(u)
	g.Expect(err).NotTo(HaveOccurred())
	v := view.(*unstructured.Unstructured)
	g.Expect(v.GetUID()).To(BeEquivalentTo("uid-1"))
	g.Expect(v.GetGeneration()).To(BeEquivalentTo(3))
	g.Expect(v.GetLabels()).To(BeEmpty())
	g.Expect(v.Object["spec"]).To(Equal(map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}))
	g.Expect(v.Object["status"]).To(Equal(u.Object["status"]))
	g.Expect(v.GroupVersionKind()).To(Equal(u.GroupVersionKind()))
}

package apply

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func TestDeleteStagesPutNamespacesLast(t *testing.T) {
	g := NewWithT(t)
	objs, err := inv("_t__Namespace", "t_sa__ServiceAccount", "t_d_apps_Deployment", "t_r_rbac.authorization.k8s.io_Role").Objects()
	g.Expect(err).NotTo(HaveOccurred())
	stages := deleteStages(objs)
	g.Expect(stages).To(HaveLen(3))
	g.Expect(stages[0][0].GetKind()).To(Equal("Deployment"))
	g.Expect(stages[1]).To(HaveLen(2))
	g.Expect(stages[2][0].GetKind()).To(Equal("Namespace"))
}

func TestDeleteStagesAreTheReverseOfTheApplyOrder(t *testing.T) {
	g := NewWithT(t)
	objects, err := inv("_ns__Namespace", "_crds.example.com_apiextensions.k8s.io_CustomResourceDefinition",
		"ns_sa__ServiceAccount", "ns_role_rbac.authorization.k8s.io_Role", "_cr_rbac.authorization.k8s.io_ClusterRole",
		"ns_cm__ConfigMap", "ns_svc__Service", "ns_web_apps_Deployment", "ns_job_batch_Job",
		"ns_widget_example.com_Widget").Objects()

	g.Expect(err).NotTo(HaveOccurred())
	var kinds [][]string
	for _, stage := range deleteStages(objects) {
		var ks []string
		for _, u := range stage {
			ks = append(ks, u.GetKind())
		}
		kinds = append(kinds, ks)
	}
	g.Expect(kinds).To(Equal([][]string{
		{"Job", "Deployment", "Widget"}, // workloads and custom resources
		{"ConfigMap", "Service"},
		{"ClusterRole", "Role", "ServiceAccount"},
		{"Namespace"},
		{"CustomResourceDefinition"},
	}))
}

func TestOwnedByChecksTheInstanceUIDWhenLabelled(t *testing.T) {
	labels := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	managed := []string{cairnv1.ManagedByLabel, cairnv1.ManagedByValue, cairnv1.InstanceLabel, "team-a.web"}
	cases := []struct {
		name   string
		labels map[string]string
		uid    string
		owned  bool
	}{
		{"labels and UID match", labels(append(managed, cairnv1.InstanceUIDLabel, "u1")...), "u1", true},
		{"another instance's UID (re-created elsewhere, or forged)", labels(append(managed, cairnv1.InstanceUIDLabel, "u2")...), "u1", false},
		{"no UID label (applied before UIDs were labelled)", labels(managed...), "u1", true},
		{"UID not checked", labels(append(managed, cairnv1.InstanceUIDLabel, "u2")...), "", true},
		{"another instance", labels(cairnv1.ManagedByLabel, cairnv1.ManagedByValue, cairnv1.InstanceLabel, "team-a.api"), "", false},
		{"not managed by cairn", labels(cairnv1.InstanceLabel, "team-a.web", cairnv1.InstanceUIDLabel, "u1"), "u1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			live := &unstructured.Unstructured{}
			live.SetLabels(tc.labels)
			g.Expect(OwnedBy(live, "team-a.web", tc.uid)).To(Equal(tc.owned))
		})
	}
}

const instanceKey = "team-a.web"

// labelled is u with cairn's labels for the instance instanceKey of UID uid ("": no
// UID label).
func labelled(u *unstructured.Unstructured, uid string) *unstructured.Unstructured {
	l := map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue, cairnv1.InstanceLabel: instanceKey}
	if uid != "" {
		l[cairnv1.InstanceUIDLabel] = uid
	}
	u.SetLabels(l)
	return u
}

// manager is a resource manager over c, as the engine hands one to the apply layer;
// the functions here use its client alone.
func manager(c client.Client) *ssa.ResourceManager {
	return ssa.NewResourceManager(c, nil, ssa.Owner{Field: cairnv1.FieldManager, Group: "cairn.dev"})
}

// deletions records the objects deleted through a fake client, in order, and lets a
// test refuse some.
type deletions struct {
	mu     sync.Mutex
	order  []string
	refuse map[string]error // by Kind/namespace/name
}

func (d *deletions) funcs() interceptor.Funcs {
	return interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		u := obj.(*unstructured.Unstructured)
		if err := d.refuse[Describe(u)]; err != nil {
			return err
		}
		d.mu.Lock()
		d.order = append(d.order, Describe(u))
		d.mu.Unlock()
		return c.Delete(ctx, obj, opts...)
	}}
}

// TestDeleteStale: prune deletes the stale objects that are still the instance's, in
// reverse apply order, each stage gone before the next, and reports each one Deleted
// or Skipped; objects that are not stale, not the instance's or already gone stay.
func TestDeleteStale(t *testing.T) {
	web := func() *unstructured.Unstructured { return obj("apps/v1", "Deployment", "team-a", "web", nil) }
	conf := func() *unstructured.Unstructured { return configMap("team-a", "conf", nil) }
	ns := func() *unstructured.Unstructured { return obj("v1", "Namespace", "", "team-a", nil) }
	sa := func() *unstructured.Unstructured { return obj("v1", "ServiceAccount", "team-a", "runner", nil) }
	for _, tc := range []struct {
		name    string
		live    []*unstructured.Unstructured
		stale   []*unstructured.Unstructured
		uid     string
		refuse  map[string]error
		deleted []string // in order
		skipped []string
		err     string
	}{
		{name: "stale objects in reverse apply order, the rest left",
			live:    []*unstructured.Unstructured{labelled(ns(), "u1"), labelled(sa(), "u1"), labelled(conf(), "u1"), labelled(web(), "u1"), labelled(configMap("team-a", "kept", nil), "u1")},
			stale:   []*unstructured.Unstructured{ns(), sa(), conf(), web()},
			uid:     "u1",
			deleted: []string{"Deployment/team-a/web", "ConfigMap/team-a/conf", "ServiceAccount/team-a/runner", "Namespace/team-a"}},
		{name: "already gone",
			stale: []*unstructured.Unstructured{conf()}, skipped: []string{"ConfigMap/team-a/conf"}},
		{name: "not managed by cairn (someone else's of the same name)",
			live: []*unstructured.Unstructured{conf()}, stale: []*unstructured.Unstructured{conf()}, skipped: []string{"ConfigMap/team-a/conf"}},
		{name: "labelled with another instance UID",
			live: []*unstructured.Unstructured{labelled(conf(), "u2")}, stale: []*unstructured.Unstructured{conf()}, uid: "u1",
			skipped: []string{"ConfigMap/team-a/conf"}},
		{name: "UID not checked",
			live: []*unstructured.Unstructured{labelled(conf(), "u2")}, stale: []*unstructured.Unstructured{conf()},
			deleted: []string{"ConfigMap/team-a/conf"}},
		{name: "a refused deletion stops before the next stage",
			live:    []*unstructured.Unstructured{labelled(conf(), ""), labelled(web(), ""), labelled(ns(), "")},
			stale:   []*unstructured.Unstructured{conf(), web(), ns()},
			refuse:  map[string]error{"ConfigMap/team-a/conf": apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "conf", errors.New("no"))},
			deleted: []string{"Deployment/team-a/web"},
			err:     "ConfigMap/team-a/conf delete failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			d := &deletions{refuse: tc.refuse}
			b := fake.NewClientBuilder().WithInterceptorFuncs(d.funcs())
			for _, u := range tc.live {
				b = b.WithObjects(u.DeepCopy())
			}
			c := b.Build()

			cs, err := DeleteStale(ctx, manager(c), InventoryOf(tc.stale, nil), instanceKey, tc.uid, time.Second)

			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				var f *outcome.Failure
				g.Expect(errors.As(err, &f)).To(BeTrue())
				g.Expect(f.Reason).To(Equal(cairnv1.ReasonPruneFailed))
				g.Expect(f.Error()).To(ContainSubstring(tc.err))
			}
			g.Expect(d.order).To(Equal(tc.deleted))
			var deleted, skipped []string
			for _, e := range cs.Entries {
				switch e.Action {
				case ssa.DeletedAction:
					deleted = append(deleted, e.Subject)
				case ssa.SkippedAction:
					skipped = append(skipped, e.Subject)
				}
			}
			g.Expect(deleted).To(ConsistOf(tc.deleted))
			g.Expect(skipped).To(ConsistOf(tc.skipped))
			for _, u := range tc.live {
				err := c.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
				if slices.Contains(tc.deleted, Describe(u)) {
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), Describe(u)+" is deleted")
				} else {
					g.Expect(err).NotTo(HaveOccurred(), Describe(u)+" stays")
				}
			}
		})
	}
}

// TestDeleteStaleWaitsForWhatIsTerminating: an object held by a finalizer is waited
// for; when it outlasts the timeout, prune fails as transient, naming it, with the
// deletion reported.
func TestDeleteStaleWaitsForWhatIsTerminating(t *testing.T) {
	g := NewWithT(t)
	held := labelled(configMap("team-a", "held", nil), "")
	held.SetFinalizers([]string{"example.com/hold"})
	c := fake.NewClientBuilder().WithObjects(held).Build()

	cs, err := DeleteStale(context.Background(), manager(c), InventoryOf([]*unstructured.Unstructured{held}, nil), instanceKey, "", 300*time.Millisecond)

	var f *outcome.Failure
	g.Expect(errors.As(err, &f)).To(BeTrue())
	g.Expect(f.Kind).To(Equal(outcome.Transient))
	g.Expect(f.Error()).To(ContainSubstring("1 object(s) still terminating after 300ms, e.g. ConfigMap/team-a/held"))
	g.Expect(cs.Entries).To(ConsistOf(HaveField("Action", ssa.DeletedAction)))
}

// TestDeleteStaleSkipsWhatWasNeverApplied: an entry recorded before an apply that
// never happened (no hash) of a kind the cluster does not serve is skipped; one that
// was applied (a hash) fails prune.
func TestDeleteStaleSkipsWhatWasNeverApplied(t *testing.T) {
	for _, applied := range []bool{false, true} {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}}
			},
		}).Build()
		w := obj("example.com/v1", "Widget", "team-a", "w", nil)
		stale := InventoryOf([]*unstructured.Unstructured{w}, nil)
		if !applied {
			e := stale[ObjectID(w)]
			e.Hash = ""
			stale[ObjectID(w)] = e
		}

		cs, err := DeleteStale(context.Background(), manager(c), stale, instanceKey, "", time.Second)

		if applied {
			g.Expect(err).To(MatchError(ContainSubstring("Widget/team-a/w: failed to read before deleting")))
		} else {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cs.Entries).To(ConsistOf(HaveField("Action", ssa.SkippedAction)))
		}
	}
}

// TestOrphanObjects: an instance removed with prune: false leaves its objects and
// takes cairn's labels off those still its own, and only those.
func TestOrphanObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mine := labelled(configMap("team-a", "mine", nil), "u1")
	mine.SetLabels(map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue, cairnv1.InstanceLabel: instanceKey,
		cairnv1.InstanceUIDLabel: "u1", "app": "web"})
	other := labelled(configMap("team-a", "other", nil), "u2")
	c := fake.NewClientBuilder().WithObjects(mine.DeepCopy(), other.DeepCopy()).Build()

	n, err := OrphanObjects(ctx, c, []*unstructured.Unstructured{mine, other, configMap("team-a", "gone", nil)}, instanceKey, "u1")

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	live := mine.DeepCopy()
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mine), live)).To(Succeed())
	g.Expect(live.GetLabels()).To(Equal(map[string]string{"app": "web"}), "cairn's labels are gone, the others stay")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(other), live)).To(Succeed())
	g.Expect(live.GetLabels()).To(HaveKeyWithValue(cairnv1.InstanceUIDLabel, "u2"))
}

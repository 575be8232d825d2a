package reconciler

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/status"
)

// TestFailedInventoryIsTheLastOneWhenNothingStayedWritten: a failed apply that left
// nothing written records the last inventory, not the new objects it never wrote.
func TestFailedInventoryIsTheLastOneWhenNothingStayedWritten(t *testing.T) {
	g := NewWithT(t)
	old := apply.Inventory{"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h1"}}
	r := (&instanceState{instanceVerdicts: instanceVerdicts{oldInv: old}}).reconcileOn(nil)
	r.wrote = written{desired: apply.Inventory{
		"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h2"},
		"_fresh__Namespace":    {ID: "_fresh__Namespace", Version: "v1", Hash: "h3"},
	}, report: apply.Report{Applied: map[string]bool{}}}

	g.Expect(r.failedInventory()).To(HaveKey("_fresh__Namespace"), "an apply that may have written records the new objects")
	r.wrote.report.Untouched = true
	g.Expect(r.failedInventory()).To(Equal(old))
}

// TestEnsureNamespaceCreatesWithoutReading: the namespace of an instance's CR is
// created without a read first (AlreadyExists says it is there, and then the sync did
// not create it); only where cairn may not create namespaces does a read say whether
// it exists; one known to exist costs nothing.
func TestEnsureNamespaceCreatesWithoutReading(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool
		forbid   bool
		known    bool
		requests []string
		created  bool
		err      string
	}{
		{name: "new: created", requests: []string{"create"}, created: true},
		{name: "there: one create answered AlreadyExists", existing: true, requests: []string{"create"}},
		{name: "known to exist: nothing sent", existing: true, known: true},
		{name: "creating forbidden, there: read", existing: true, forbid: true, requests: []string{"create", "get"}},
		{name: "creating forbidden, not there: the create's error", forbid: true, requests: []string{"create", "get"},
			err: "failed to create namespace team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var requests []string
			b := fake.NewClientBuilder().WithScheme(Scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					requests = append(requests, "create")
					if tc.forbid {
						return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, obj.GetName(), errors.New("no"))
					}
					return c.Create(ctx, obj, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					requests = append(requests, "get")
					return c.Get(ctx, key, obj, opts...)
				},
			})
			if tc.existing {
				b = b.WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
			}
			s := &RevisionState{revisionInput: revisionInput{e: &Engine{cluster: &Cluster{client: b.Build()}}},
				clusterView: clusterView{namespaces: map[string]bool{"team": tc.known}, createdNamespaces: map[string]bool{}}}

			err := s.ensureNamespace(context.Background(), "team")

			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.knownNamespace("team")).To(BeTrue())
			}
			g.Expect(requests).To(Equal(tc.requests))
			g.Expect(s.createdNamespace("team")).To(Equal(tc.created), "only a namespace this sync created spares its objects' ownership check")
		})
	}
}

// TestTheOutcomeIsRecordedOverAWriteSinceTheInventory: the status patch that records
// an instance's outcome carries the status alone, so that the revision step writing
// the CR in between (the next input) does not make it fail, whichever version of the
// CR it was computed from (with the resourceVersion of the pending inventory's
// write, it failed with a conflict).
func TestTheOutcomeIsRecordedOverAWriteSinceTheInventory(t *testing.T) {
	for _, base := range []string{"from the inventory's write", "from the CR as found"} {
		t.Run(base, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := fake.NewClientBuilder().WithScheme(Scheme).WithStatusSubresource(&cairnv1.ModuleInstance{}).
				WithObjects(&cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web"}}).Build()
			mi := &cairnv1.ModuleInstance{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "web"}, mi)).To(Succeed())
			before := mi.DeepCopy()

			// persistInventory: the pending inventory is written to the status.
			mi.Status.Inventory = &cairnv1.Inventory{Count: 2}
			g.Expect(patchStatus(ctx, c, mi, before.DeepCopy())).To(Succeed())
			persisted := mi.Status.Inventory.DeepCopy()
			if base == "from the inventory's write" {
				before = mi.DeepCopy()
			}
			// The revision step writes the next input meanwhile.
			next := &cairnv1.ModuleInstance{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mi), next)).To(Succeed())
			next.Annotations = map[string]string{InputDigestAnnotation: "sha256:next"}
			g.Expect(c.Update(ctx, next)).To(Succeed())

			// record: the outcome.
			status.Succeeded(mi, "abc", cairnv1.ReasonSucceeded, "2 objects applied")
			before.Status.Inventory = persisted
			g.Expect(patchStatus(ctx, c, mi, before)).To(Succeed())
			got := &cairnv1.ModuleInstance{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mi), got)).To(Succeed())
			g.Expect(got.Status.LastAppliedRevision).To(Equal("abc"))
			g.Expect(got.Status.Inventory.Count).To(BeEquivalentTo(2))
			g.Expect(got.Annotations).To(HaveKeyWithValue(InputDigestAnnotation, "sha256:next"), "the other write stays")
			g.Expect(mi.Annotations).To(HaveKeyWithValue(InputDigestAnnotation, "sha256:next"), "mi is the CR as the patch left it")
		})
	}
}

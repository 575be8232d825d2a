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

	"cairn.dev/cairn/reconciler/apply"
)

// TestFailedInventoryIsTheLastOneWhenNothingStayedWritten: a failed apply that left
// nothing written records the last inventory, not the new objects it never wrote.
func TestFailedInventoryIsTheLastOneWhenNothingStayedWritten(t *testing.T) {
	g := NewWithT(t)
	old := apply.Inventory{"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h1"}}
	r := &instanceRun{instanceVerdicts: instanceVerdicts{oldInv: old}, wrote: written{desired: apply.Inventory{
		"ns_a_apps_Deployment": {ID: "ns_a_apps_Deployment", Version: "apps/v1", Hash: "h2"},
		"_fresh__Namespace":    {ID: "_fresh__Namespace", Version: "v1", Hash: "h3"},
	}, report: apply.Report{Applied: map[string]bool{}}}}

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
			s := &syncRun{revisionInput: revisionInput{e: &Engine{cluster: &Cluster{client: b.Build()}}},
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

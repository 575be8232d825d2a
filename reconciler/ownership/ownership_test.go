package ownership

import (
	"context"
	"errors"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
)

// requests records what a check sends, by verb and object name.
type requests struct {
	mu  sync.Mutex
	log []string
}

func (r *requests) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

// client is a fake API server holding live, whose answers to a dry-run of an apply
// carry a resourceVersion only for an existing object, as the API server's do;
// refuse, when set, fails the dry-run of an object.
func (r *requests) client(live []client.Object, refuse func(u *unstructured.Unstructured) error, getErr error) client.Client {
	return fake.NewClientBuilder().WithObjects(live...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			u := obj.(*unstructured.Unstructured)
			r.add("dry-run " + u.GetName())
			if refuse != nil {
				if err := refuse(u); err != nil {
					return err
				}
			}
			existing := u.DeepCopy()
			err := c.Get(ctx, client.ObjectKeyFromObject(u), existing)
			switch {
			case apierrors.IsNotFound(err):
				u.SetResourceVersion("")
				return nil
			case err != nil:
				return err
			}
			u.SetResourceVersion(existing.GetResourceVersion())
			return nil
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			r.add("get " + key.Name)
			if getErr != nil {
				return getErr
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
}

// fakeOwners: gone are the labels of instances without CR or declaration; gives
// are the ids their owners give up.
type fakeOwners struct {
	gone  map[string]bool
	gives map[string]bool
}

func (o fakeOwners) Gone(owner string) bool { return o.gone[owner] }

func (o fakeOwners) Releases(ctx context.Context, owner, id string) (bool, error) {
	return o.gives[id], nil
}

func cm(name string, labels map[string]string) *unstructured.Unstructured {
	u := testobj.Object("v1", "ConfigMap", "ns", name)
	u.SetLabels(labels)
	return u
}

func owned(instance string) map[string]string {
	return map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue, cairnv1.InstanceLabel: instance}
}

func TestCheck(t *testing.T) {
	const me = "ns.me"
	mine := owned(me)
	for _, tc := range []struct {
		name     string
		live     []*unstructured.Unstructured
		objects  []*unstructured.Unstructured
		held     []string // ids of the instance's last inventory
		created  bool     // the sync created namespace ns
		adopt    bool
		owners   fakeOwners
		refuse   func(u *unstructured.Unstructured) error
		getErr   error
		requests []string // in any order
		valid    []string
		adopted  []string
		err      string
		reason   string
	}{
		{name: "new objects: one dry-run each, no read",
			objects:  []*unstructured.Unstructured{cm("a", mine), cm("b", mine)},
			requests: []string{"dry-run a", "dry-run b"},
			valid:    []string{"ns_a__ConfigMap", "ns_b__ConfigMap"}},
		{name: "objects the inventory holds are not asked about",
			live:    []*unstructured.Unstructured{cm("a", mine)},
			objects: []*unstructured.Unstructured{cm("a", mine)},
			held:    []string{"ns_a__ConfigMap"}},
		{name: "nothing is asked in a namespace the sync created",
			objects: []*unstructured.Unstructured{cm("a", mine)},
			created: true},
		{name: "an existing object labelled as the instance's own is read and taken",
			live:     []*unstructured.Unstructured{cm("a", mine)},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			requests: []string{"dry-run a", "get a"},
			valid:    []string{"ns_a__ConfigMap"}},
		{name: "another live instance's object is refused",
			live:     []*unstructured.Unstructured{cm("a", owned("ns.other"))},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			requests: []string{"dry-run a", "get a"},
			err:      "ConfigMap/ns/a is owned by instance ns/other", reason: cairnv1.ReasonOwnershipConflict},
		{name: "another instance's object it gives up in this revision is taken (a move)",
			live:     []*unstructured.Unstructured{cm("a", owned("ns.other"))},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			owners:   fakeOwners{gives: map[string]bool{"ns_a__ConfigMap": true}},
			requests: []string{"dry-run a", "get a"},
			valid:    []string{"ns_a__ConfigMap"}},
		{name: "what an instance gone from Git and cluster left is nobody's: adopted with spec.adopt",
			live:     []*unstructured.Unstructured{cm("a", owned("ns.gone"))},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			owners:   fakeOwners{gone: map[string]bool{"ns.gone": true}},
			adopt:    true,
			requests: []string{"dry-run a", "get a"},
			valid:    []string{"ns_a__ConfigMap"},
			adopted:  []string{"ConfigMap/ns/a"}},
		{name: "an object no cairn instance owns is refused without spec.adopt",
			live:     []*unstructured.Unstructured{cm("a", nil)},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			requests: []string{"dry-run a", "get a"},
			err:      "ConfigMap/ns/a already exists and no cairn instance owns it: set spec.adopt: true",
			reason:   cairnv1.ReasonOwnershipConflict},
		{name: "cairn's own unlabelled object cannot be adopted",
			live:     []*unstructured.Unstructured{cm("a", map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue})},
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			adopt:    true,
			requests: []string{"dry-run a", "get a"},
			err:      "ConfigMap/ns/a is cairn's own and cannot be adopted", reason: cairnv1.ReasonOwnershipConflict},
		{name: "a failed dry-run is not valid, and the read decides",
			objects:  []*unstructured.Unstructured{cm("a", mine), cm("b", mine)},
			refuse:   refuseNamed("a", apierrors.NewBadRequest("no")),
			requests: []string{"dry-run a", "get a", "dry-run b"},
			valid:    []string{"ns_b__ConfigMap"}},
		{name: "a kind the cluster does not serve yet comes with the render: nothing read",
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			refuse:   refuseNamed("a", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "ConfigMap"}}),
			requests: []string{"dry-run a"}},
		{name: "a read that fails is that failure, not a conflict",
			objects:  []*unstructured.Unstructured{cm("a", mine)},
			refuse:   refuseNamed("a", apierrors.NewBadRequest("no")),
			getErr:   apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("no")),
			requests: []string{"dry-run a", "get a"},
			err:      "ConfigMap/ns/a: failed to read before applying", reason: cairnv1.ReasonApplyFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var live []client.Object
			for _, u := range tc.live {
				live = append(live, u)
			}
			r := &requests{}
			c := r.client(live, tc.refuse, tc.getErr)
			held := apply.Inventory{}
			for _, id := range tc.held {
				held[id] = cairnv1.InventoryEntry{ID: id, Version: "v1", Hash: "h"}
			}
			req := Request{Instance: me, Objects: tc.objects, Held: held, Adopt: tc.adopt,
				Created: func(ns string) bool { return tc.created && ns == "ns" }}

			res, f := Check(context.Background(), c, req, tc.owners)

			g.Expect(r.log).To(ConsistOf(orEmpty(tc.requests)))
			if tc.err != "" {
				g.Expect(f).NotTo(BeNil())
				g.Expect(f.Error()).To(ContainSubstring(tc.err))
				g.Expect(f.Reason).To(Equal(tc.reason))
				g.Expect(f.Kind).To(Equal(outcome.Stalled))
				return
			}
			g.Expect(f).To(BeNil())
			var valid []string
			for id := range res.Valid {
				valid = append(valid, id)
			}
			g.Expect(valid).To(ConsistOf(orEmpty(tc.valid)))
			g.Expect(res.Adopted).To(Equal(tc.adopted))
		})
	}
}

func refuseNamed(name string, err error) func(u *unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if u.GetName() == name {
			return err
		}
		return nil
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestInventorySecretName: one name per instance in cairn's namespace, a valid name
// even for the longest instance names.
func TestInventorySecretName(t *testing.T) {
	long := strings.Repeat("n", 253)
	tests := []struct {
		ns, name, want string
	}{
		{"team-a", "web", "cairn-inventory-team-a.web"},
		{"team-a", "web.v2", "cairn-inventory-team-a.web.v2"},
		{"team", "a.web", "cairn-inventory-team.a.web"},
		{"team-a", long, "cairn-inventory-dd5177f5a83c7029a660a2224b3e5aab"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			g := NewWithT(t)
			got := InventorySecretName(&cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: tt.ns, Name: tt.name}})
			g.Expect(got).To(Equal(tt.want))
			g.Expect(validation.IsDNS1123Subdomain(got)).To(BeEmpty())
		})
	}
}

// TestInventoryStoreKeepsLargeInventoriesInCairnsNamespace: a large inventory goes to
// a Secret in cairn's namespace, is read back from there, and is deleted from there;
// an inventory an earlier cairn spilled beside the instance is still read.
func TestInventoryStoreKeepsLargeInventoriesInCairnsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	st := InventoryStore{Client: c, Namespace: "cairn-system"}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	big := Inventory{}
	for i := range inlineInventoryLimit + 1 {
		id := fmt.Sprintf("team-a_cm-%d__ConfigMap", i)
		big[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	g.Expect(st.Store(ctx, mi, big, nil)).To(Succeed())
	g.Expect(mi.Status.Inventory.SecretRef.Name).To(Equal("cairn-inventory-team-a.web"))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "cairn-system", Name: "cairn-inventory-team-a.web"}, &corev1.Secret{})).To(Succeed())
	back, err := st.Load(ctx, mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveLen(len(big)))

	data, err := EncodeGzipJSON(big.Entries()[:3])
	g.Expect(err).NotTo(HaveOccurred())
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cairn-inventory-old"},
		Data: map[string][]byte{InventorySecretKey: data}}
	g.Expect(c.Create(ctx, legacy)).To(Succeed())
	old := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "old"}}
	old.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: "cairn-inventory-old"}}
	back, err = st.Load(ctx, old)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveLen(3))

	g.Expect(st.Remove(ctx, mi)).To(Succeed())
	_, err = st.Load(ctx, mi)
	g.Expect(err).To(MatchError(ContainSubstring("cairn-system/cairn-inventory-team-a.web")))
}

// TestInventoryOfASecretDerivedNameIsMaskedInTheStatus: an object named after a value
// of a valuesFrom Secret shows masked in the status, and the inventory as loaded (for
// prune) still names it.
func TestInventoryOfASecretDerivedNameIsMaskedInTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	st := InventoryStore{Client: c, Namespace: "cairn-system"}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	inv := Inventory{}
	for _, id := range []string{"team-a_web__ConfigMap", "team-a_db-hunter2hunter__ConfigMap"} {
		inv[id] = cairnv1.InventoryEntry{ID: id, Version: "v1", Hash: "h"}
	}
	g.Expect(st.Store(ctx, mi, inv, func(id string) string { return strings.ReplaceAll(id, "hunter2hunter", "***") })).To(Succeed())

	b, _ := json.Marshal(mi.Status)
	g.Expect(string(b)).NotTo(ContainSubstring("hunter2hunter"))
	g.Expect(mi.Status.Inventory.Entries).To(ContainElement(HaveField("ID", "team-a_db-***__ConfigMap")))
	g.Expect(mi.Status.Inventory.Count).To(BeEquivalentTo(2))
	back, err := st.Load(ctx, mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveKey("team-a_db-hunter2hunter__ConfigMap"), "prune still finds it")

	g.Expect(st.Store(ctx, mi, inv, nil)).To(Succeed())
	g.Expect(mi.Status.Inventory.SecretRef).To(BeNil(), "nothing to mask: inline as before")
}

// TestInventoryStoreKeepAndLoad: Keep writes the inventory a deleted CR held inline
// to the instance's Secret, so that Load finds it there by name; an empty or missing
// inventory writes nothing, and one already in a Secret is left where it is.
func TestInventoryStoreKeepAndLoad(t *testing.T) {
	entries := inv("team-a_a__ConfigMap", "team-a_b__ConfigMap").Entries()
	for _, tc := range []struct {
		name    string
		status  *cairnv1.Inventory
		written bool
	}{
		{"inline entries are written", &cairnv1.Inventory{Entries: entries, Count: 2}, true},
		{"no inventory", nil, false},
		{"an empty inventory", &cairnv1.Inventory{}, false},
		{"already in a Secret", &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: "cairn-inventory-team-a.web"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := fake.NewClientBuilder().Build()
			st := InventoryStore{Client: c, Namespace: "cairn-system"}
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			mi.Status.Inventory = tc.status

			g.Expect(st.Keep(ctx, mi)).To(Succeed())

			var s corev1.Secret
			err := c.Get(ctx, client.ObjectKey{Namespace: "cairn-system", Name: "cairn-inventory-team-a.web"}, &s)
			if !tc.written {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Labels).To(HaveKeyWithValue(cairnv1.ManagedByLabel, cairnv1.ManagedByValue))
			// A later sync finds the kept inventory through the name alone, as it does
			// for an instance without a CR.
			found := &cairnv1.ModuleInstance{ObjectMeta: mi.ObjectMeta}
			found.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: InventorySecretName(mi)}}
			back, err := st.Load(ctx, found)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(InventoryFromEntries(entries)))
		})
	}
}

// TestInventoryStoreLoadsWhatTheStatusHolds: an instance with no inventory has an
// empty one; an inline one reads as it is; a Secret that cannot be decoded fails with
// its name.
func TestInventoryStoreLoadsWhatTheStatusHolds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	broken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cairn-system", Name: "cairn-inventory-team-a.web"},
		Data: map[string][]byte{InventorySecretKey: []byte("not gzip")}}
	st := InventoryStore{Client: fake.NewClientBuilder().WithObjects(broken).Build(), Namespace: "cairn-system"}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}

	got, err := st.Load(ctx, mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeEmpty())

	mi.Status.Inventory = &cairnv1.Inventory{Entries: inv("team-a_a__ConfigMap").Entries(), Count: 1}
	g.Expect(st.Load(ctx, mi)).To(Equal(inv("team-a_a__ConfigMap")))

	mi.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: "cairn-inventory-team-a.web"}}
	_, err = st.Load(ctx, mi)
	g.Expect(err).To(MatchError(ContainSubstring("failed to decode inventory Secret cairn-system/cairn-inventory-team-a.web")))
}

func TestGzipJSONRoundTrip(t *testing.T) {
	g := NewWithT(t)
	in := inv("team-a_a__ConfigMap", "_ns__Namespace").Entries()
	data, err := EncodeGzipJSON(in)
	g.Expect(err).NotTo(HaveOccurred())
	var out []cairnv1.InventoryEntry
	g.Expect(DecodeGzipJSON(data, &out)).To(Succeed())
	g.Expect(out).To(Equal(in))
	g.Expect(DecodeGzipJSON([]byte("plain"), &out)).NotTo(Succeed())
}

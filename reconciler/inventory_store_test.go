package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
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
			got := inventorySecretName(&cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: tt.ns, Name: tt.name}})
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
	c := fake.NewClientBuilder().WithScheme(Scheme).Build()
	st := inventoryStore{c: c, namespace: "cairn-system"}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	big := apply.Inventory{}
	for i := range inlineInventoryLimit + 1 {
		id := fmt.Sprintf("team-a_cm-%d__ConfigMap", i)
		big[id] = cairnv1.InventoryEntry{ID: id, Version: "v1"}
	}
	g.Expect(st.store(ctx, mi, big, nil)).To(Succeed())
	g.Expect(mi.Status.Inventory.SecretRef.Name).To(Equal("cairn-inventory-team-a.web"))
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "cairn-system", Name: "cairn-inventory-team-a.web"}, &corev1.Secret{})).To(Succeed())
	back, err := st.load(ctx, mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveLen(len(big)))

	data, err := encodeGzipJSON(big.Entries()[:3])
	g.Expect(err).NotTo(HaveOccurred())
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cairn-inventory-old"},
		Data: map[string][]byte{inventorySecretKey: data}}
	g.Expect(c.Create(ctx, legacy)).To(Succeed())
	old := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "old"}}
	old.Status.Inventory = &cairnv1.Inventory{SecretRef: &cairnv1.LocalObjectReference{Name: "cairn-inventory-old"}}
	back, err = st.load(ctx, old)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveLen(3))

	g.Expect(st.remove(ctx, mi)).To(Succeed())
	_, err = st.load(ctx, mi)
	g.Expect(err).To(MatchError(ContainSubstring("cairn-system/cairn-inventory-team-a.web")))
}

// TestInventoryOfASecretDerivedNameIsMaskedInTheStatus: an object named after a value
// of a valuesFrom Secret shows masked in the status, and the inventory as loaded (for
// prune) still names it.
func TestInventoryOfASecretDerivedNameIsMaskedInTheStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(Scheme).Build()
	st := inventoryStore{c: c, namespace: "cairn-system"}
	mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	inv := apply.Inventory{}
	for _, id := range []string{"team-a_web__ConfigMap", "team-a_db-hunter2hunter__ConfigMap"} {
		inv[id] = cairnv1.InventoryEntry{ID: id, Version: "v1", Hash: "h"}
	}
	g.Expect(st.store(ctx, mi, inv, []string{"hunter2hunter"})).To(Succeed())

	b, _ := json.Marshal(mi.Status)
	g.Expect(string(b)).NotTo(ContainSubstring("hunter2hunter"))
	g.Expect(mi.Status.Inventory.Entries).To(ContainElement(HaveField("ID", "team-a_db-***__ConfigMap")))
	g.Expect(mi.Status.Inventory.Count).To(BeEquivalentTo(2))
	back, err := st.load(ctx, mi)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back).To(HaveKey("team-a_db-hunter2hunter__ConfigMap"), "prune still finds it")

	g.Expect(st.store(ctx, mi, inv, nil)).To(Succeed())
	g.Expect(mi.Status.Inventory.SecretRef).To(BeNil(), "nothing to mask: inline as before")
}

package apply

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// obj is an object of apiVersion and kind with a name, in namespace ("" for a
// cluster-scoped one), and fields set at the top level (spec, data...).
func obj(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func configMap(namespace, name string, data map[string]any) *unstructured.Unstructured {
	return obj("v1", "ConfigMap", namespace, name, map[string]any{"data": data})
}

// inv is an inventory of ids, each with version v1 and hash h.
func inv(ids ...string) Inventory {
	out := Inventory{}
	for _, id := range ids {
		out[id] = cairnv1.InventoryEntry{ID: id, Version: "v1", Hash: "h"}
	}
	return out
}

func TestObjectIDAndDescribe(t *testing.T) {
	for _, tc := range []struct {
		u        *unstructured.Unstructured
		id, desc string
	}{
		{configMap("team-a", "web", nil), "team-a_web__ConfigMap", "ConfigMap/team-a/web"},
		{obj("apps/v1", "Deployment", "team-a", "web", nil), "team-a_web_apps_Deployment", "Deployment/team-a/web"},
		{obj("v1", "Namespace", "", "team-a", nil), "_team-a__Namespace", "Namespace/team-a"},
		{obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com", nil),
			"_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition", "CustomResourceDefinition/widgets.example.com"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ObjectID(tc.u)).To(Equal(tc.id))
			g.Expect(Describe(tc.u)).To(Equal(tc.desc))
		})
	}
}

// TestInventoryOfRecordsVersionAndKeyedHash: the hash follows the content and the
// key, never the plain content alone, and the version is the object's apiVersion.
func TestInventoryOfRecordsVersionAndKeyedHash(t *testing.T) {
	k1, k2 := []byte("key-one-key-one-key-one-key-one!"), []byte("key-two-key-two-key-two-key-two!")
	for _, tc := range []struct {
		name       string
		a, b       *unstructured.Unstructured
		keyA, keyB []byte
		same       bool
	}{
		{"same object, same key", configMap("ns", "c", map[string]any{"a": "1"}), configMap("ns", "c", map[string]any{"a": "1"}), k1, k1, true},
		{"another value", configMap("ns", "c", map[string]any{"a": "1"}), configMap("ns", "c", map[string]any{"a": "2"}), k1, k1, false},
		{"another key", configMap("ns", "c", map[string]any{"a": "1"}), configMap("ns", "c", map[string]any{"a": "1"}), k1, k2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			a := InventoryOf([]*unstructured.Unstructured{tc.a}, tc.keyA)["ns_c__ConfigMap"]
			b := InventoryOf([]*unstructured.Unstructured{tc.b}, tc.keyB)["ns_c__ConfigMap"]
			g.Expect(a.ID).To(Equal("ns_c__ConfigMap"))
			g.Expect(a.Version).To(Equal("v1"))
			g.Expect(a.Hash).To(HaveLen(16))
			g.Expect(a.Hash).To(Equal(ObjectHash(tc.a, tc.keyA)))
			g.Expect(a.Hash == b.Hash).To(Equal(tc.same))
		})
	}
}

// TestInventorySetOperations: what prune deletes is the last inventory minus the
// desired one; what a sync records is the union, the newer entry winning.
func TestInventorySetOperations(t *testing.T) {
	newer := Inventory{"ns_b__ConfigMap": {ID: "ns_b__ConfigMap", Version: "v1", Hash: "new"}}
	for _, tc := range []struct {
		name string
		got  Inventory
		want Inventory
	}{
		{"minus leaves out the ids of the other", inv("ns_a__ConfigMap", "ns_b__ConfigMap").Minus(inv("ns_b__ConfigMap", "ns_c__ConfigMap")), inv("ns_a__ConfigMap")},
		{"minus of an empty inventory is a copy", inv("ns_a__ConfigMap").Minus(Inventory{}), inv("ns_a__ConfigMap")},
		{"minus of itself is empty", inv("ns_a__ConfigMap").Minus(inv("ns_a__ConfigMap")), Inventory{}},
		{"union holds the ids of both", inv("ns_a__ConfigMap").Union(inv("ns_c__ConfigMap")), inv("ns_a__ConfigMap", "ns_c__ConfigMap")},
		{"union: the other wins on equal ids", inv("ns_a__ConfigMap", "ns_b__ConfigMap").Union(newer),
			Inventory{"ns_a__ConfigMap": inv("ns_a__ConfigMap")["ns_a__ConfigMap"], "ns_b__ConfigMap": newer["ns_b__ConfigMap"]}},
		{"union with nothing", Inventory(nil).Union(nil), Inventory{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.got).To(Equal(tc.want))
		})
	}
}

// TestInventoryOperationsLeaveTheirOperandsAlone: an inventory is shared between the
// steps of a sync (the last one loaded, the desired one), so no operation writes it.
func TestInventoryOperationsLeaveTheirOperandsAlone(t *testing.T) {
	g := NewWithT(t)
	a, b := inv("ns_a__ConfigMap", "ns_b__ConfigMap"), inv("ns_b__ConfigMap")
	u := a.Union(b)
	u["ns_z__ConfigMap"] = cairnv1.InventoryEntry{ID: "ns_z__ConfigMap"}
	m := a.Minus(b)
	m["ns_y__ConfigMap"] = cairnv1.InventoryEntry{ID: "ns_y__ConfigMap"}
	g.Expect(a).To(Equal(inv("ns_a__ConfigMap", "ns_b__ConfigMap")))
	g.Expect(b).To(Equal(inv("ns_b__ConfigMap")))
}

// TestInventoryEntriesAndObjectsRoundTrip: entries come sorted by id, they read back
// into the same inventory, and the skeleton objects name each object with its version.
func TestInventoryEntriesAndObjectsRoundTrip(t *testing.T) {
	g := NewWithT(t)
	objects := []*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "team-a", "web", nil),
		obj("v1", "Namespace", "", "team-a", nil),
		configMap("team-a", "conf", map[string]any{"k": "v"}),
	}
	i := InventoryOf(objects, []byte("k"))
	entries := i.Entries()
	g.Expect(entries).To(HaveLen(3))
	g.Expect(entries[0].ID).To(Equal("_team-a__Namespace"))
	g.Expect(entries[1].ID).To(Equal("team-a_conf__ConfigMap"))
	g.Expect(entries[2].ID).To(Equal("team-a_web_apps_Deployment"))
	g.Expect(InventoryFromEntries(entries)).To(Equal(i))

	skeletons, err := i.Objects()
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, u := range skeletons {
		names = append(names, u.GetAPIVersion()+" "+Describe(u))
		g.Expect(ObjectID(u)).To(BeElementOf(ObjectID(objects[0]), ObjectID(objects[1]), ObjectID(objects[2])))
	}
	g.Expect(names).To(Equal([]string{"v1 Namespace/team-a", "v1 ConfigMap/team-a/conf", "apps/v1 Deployment/team-a/web"}))

	_, err = Inventory{"not-an-id": {ID: "not-an-id"}}.Objects()
	g.Expect(err).To(HaveOccurred())
}

package main

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestLeaderElectionNamespace(t *testing.T) {
	tests := []struct {
		name, flag, podNamespace, want string
	}{
		{"the flag first", "ops", "cairn", "ops"},
		{"then the pod's namespace", "", "cairn", "cairn"},
		{"else cairn-system", "", "", "cairn-system"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tt.podNamespace)
			g := NewWithT(t)
			g.Expect((&controllerFlags{leaderNS: tt.flag}).leaderNamespace()).To(Equal(tt.want))
		})
	}
}

func TestControllerRefusesANonPositiveInterval(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "controller", "--interval", "0", "--repo", t.TempDir())
	g.Expect(r.err).To(MatchError("--interval must be positive"))
}

func TestOwnWritesDoNotKick(t *testing.T) {
	at := func(sec int) *metav1.Time { tm := metav1.NewTime(time.Unix(int64(1_800_000_000+sec), 0)); return &tm }
	entry := func(manager string, sec int, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: at(sec), Subresource: sub,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}
	}
	for _, tc := range []struct {
		name   string
		fields []metav1.ManagedFieldsEntry
		kick   bool
	}{
		{"created by cairn's mirror", []metav1.ManagedFieldsEntry{entry(cairnv1.FieldManager, 1, "")}, false},
		{"cairn's own status write after its mirror", []metav1.ManagedFieldsEntry{entry(cairnv1.FieldManager, 1, ""), entry(cairnv1.FieldManager, 5, "status")}, false},
		{"a kubectl edit after the mirror", []metav1.ManagedFieldsEntry{entry(cairnv1.FieldManager, 1, ""), entry("kubectl-edit", 2, "")}, true},
		{"the mirror reverted the edit", []metav1.ManagedFieldsEntry{entry("kubectl-edit", 2, ""), entry(cairnv1.FieldManager, 3, "")}, false},
		{"an edit in the same second as the mirror", []metav1.ManagedFieldsEntry{entry(cairnv1.FieldManager, 2, ""), entry("kubectl-edit", 2, "")}, true},
		{"cairn suspend", []metav1.ManagedFieldsEntry{entry(cairnv1.FieldManager, 1, ""), entry("cairn-suspend", 4, "")}, true},
		{"created by hand", []metav1.ManagedFieldsEntry{entry("kubectl-create", 1, "")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mi := &cairnv1.ModuleInstance{}
			mi.ManagedFields = tc.fields
			g.Expect(notOwnWrite.Create(event.CreateEvent{Object: mi})).To(Equal(tc.kick))
			g.Expect(notOwnWrite.Update(event.UpdateEvent{ObjectOld: mi, ObjectNew: mi})).To(Equal(tc.kick))
			g.Expect(notOwnWrite.Delete(event.DeleteEvent{Object: mi})).To(BeTrue(), "a deletion always kicks")
			// The informer cache keeps no field sets: the same answer without them.
			_, err := withoutFieldSets(mi)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mi.ManagedFields).To(HaveLen(len(tc.fields)))
			for _, f := range mi.ManagedFields {
				g.Expect(f.FieldsV1).To(BeNil())
				g.Expect(f.Manager).NotTo(BeEmpty())
			}
			g.Expect(notOwnWrite.Update(event.UpdateEvent{ObjectOld: mi, ObjectNew: mi})).To(Equal(tc.kick))
		})
	}
}

// TestTheCacheKeepsNoFieldSets: the informer cache's transform clears the field sets
// of typed and unstructured objects alike, and keeps who wrote when.
func TestTheCacheKeepsNoFieldSets(t *testing.T) {
	g := NewWithT(t)
	now := metav1.Now()
	fields := []metav1.ManagedFieldsEntry{{Manager: cairnv1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &now,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:values":{}}}`)}}}
	u := &unstructured.Unstructured{}
	u.SetManagedFields(fields)
	got, err := withoutFieldSets(u)
	g.Expect(err).NotTo(HaveOccurred())
	kept := got.(*unstructured.Unstructured).GetManagedFields()
	g.Expect(kept).To(HaveLen(1))
	g.Expect(kept[0].FieldsV1).To(BeNil())
	g.Expect(kept[0].Manager).To(Equal(cairnv1.FieldManager))
	g.Expect(kept[0].Time.Unix()).To(Equal(now.Unix()))
	none := &corev1.Secret{}
	g.Expect(withoutFieldSets(none)).To(Equal(none), "nothing to clear")
	_, err = withoutFieldSets("not an object")
	g.Expect(err).NotTo(HaveOccurred())
}

// TestControllerFlagDefaults: one shard unless told otherwise (none by default for a
// directory, which has no SHA a replica could read), and Go's profiles served only
// where --pprof-bind-address says.
func TestControllerFlagDefaults(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		dir         bool
		shards      int
		pprof       string
		description string
	}{
		{nil, false, 1, "", "defaults: one shard, no profiles"},
		{nil, true, 0, "", "a directory: the leader reconciles"},
		{[]string{"--shards", "2"}, true, 2, "", "a directory with --shards: as given (refused later, naming why)"},
		{[]string{"--shards", "0", "--pprof-bind-address", "127.0.0.1:6060"}, false, 0, "127.0.0.1:6060", "both given"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			g := NewWithT(t)
			cf := &controllerFlags{}
			cmd := &cobra.Command{Use: "controller"}
			cf.register(cmd)
			g.Expect(cmd.ParseFlags(tc.args)).To(Succeed())
			g.Expect(cf.shardsFor(tc.dir, cmd.Flags().Changed("shards"))).To(Equal(tc.shards))
			opts, err := managerOptions(cf, &rest.Config{}, "cairn-system")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(opts.PprofBindAddress).To(Equal(tc.pprof))
		})
	}
}

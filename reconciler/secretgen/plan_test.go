package secretgen

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestPlans: a sync of an affected instance does what was decided; one of an
// instance the revision does not affect only rotates what is due, once its CR exists.
func TestPlans(t *testing.T) {
	rotating := randomSpec("api", 8)
	rotating.RotateAfter = &metav1.Duration{Duration: time.Hour}
	once := randomSpec("db", 8)
	once.Once = true
	due := liveSecret("team-a", rotating, 2*time.Hour, "v")
	unaffected := "the revision does not change the instance and no rotation is due"
	for _, tc := range []struct {
		name             string
		live             []client.Object
		affected, exists bool
		want             []Plan
	}{
		{name: "affected", live: []client.Object{due}, affected: true, exists: true, want: []Plan{
			{Secret: "Secret/team-a/db", Action: "create", Why: "absent"},
			{Secret: "Secret/team-a/api", Action: "rotate", Why: "generated at 2026-03-01T10:00:00Z, older than rotateAfter 1h0m0s"}}},
		{name: "unaffected: the due rotation only", live: []client.Object{due}, exists: true, want: []Plan{
			{Secret: "Secret/team-a/db", Action: "keep", Why: unaffected},
			{Secret: "Secret/team-a/api", Action: "rotate", Why: "generated at 2026-03-01T10:00:00Z, older than rotateAfter 1h0m0s"}}},
		{name: "unaffected without a CR: nothing", live: []client.Object{due}, want: []Plan{
			{Secret: "Secret/team-a/db", Action: "keep", Why: unaffected},
			{Secret: "Secret/team-a/api", Action: "keep", Why: unaffected}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithObjects(tc.live...).Build()
			decls, err := Read(context.Background(), c, secretsInstance(once, rotating), "uid-2", secretsNow, nil)
			g.Expect(err).NotTo(HaveOccurred())
			plans := Plans(decls, tc.affected, tc.exists)
			g.Expect(plans).To(Equal(tc.want))
			g.Expect(PlansChange(plans)).To(Equal(tc.affected || tc.exists))
		})
	}
	g := NewWithT(t)
	g.Expect(Plans(nil, true, true)).To(BeNil())
	g.Expect(PlansChange([]Plan{{Action: "keep"}})).To(BeFalse())
	g.Expect(Line(Plan{Secret: "Secret/team-a/db", Action: "create", Why: "absent"})).To(Equal("create Secret/team-a/db (absent)"))
}

// TestSummary: per declaration, the strongest action among its Secrets.
func TestSummary(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Summary(nil)).To(BeEmpty())
	decls := []*Decl{
		{spec: cairnv1.GeneratedSecret{Name: "db-pass"}, targets: []*Target{{action: Keep}, {action: Create}}},
		{spec: cairnv1.GeneratedSecret{Name: "api-key"}, targets: []*Target{{action: Rotate}, {action: Update}}},
		{spec: cairnv1.GeneratedSecret{Name: "token"}, targets: []*Target{{action: Update}, {action: Keep}}},
		{spec: cairnv1.GeneratedSecret{Name: "tls"}, targets: []*Target{{action: Keep}}},
	}
	g.Expect(Summary(decls)).To(Equal("generated Secrets: db-pass created, api-key rotated, token updated, tls kept"))
}

func TestRotation(t *testing.T) {
	g := NewWithT(t)
	rotating := randomSpec("api", 8)
	rotating.RotateAfter = &metav1.Duration{Duration: time.Hour}
	never := randomSpec("db", 8)
	never.RotateAfter = &metav1.Duration{}
	g.Expect(HasRotation(rotating)).To(BeTrue())
	g.Expect(HasRotation(never)).To(BeFalse(), "a zero rotateAfter never rotates")
	g.Expect(InstanceRotates(secretsInstance(never, rotating))).To(BeTrue())
	g.Expect(InstanceRotates(secretsInstance(never))).To(BeFalse())
}

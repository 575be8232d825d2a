package reconciler

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render/declarations"
)

// TestExplainIdentity: only a denial of an instance that applies as cairn itself is
// explained, and then it names both ways out and keeps the API server's words.
func TestExplainIdentity(t *testing.T) {
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no rule"))
	forbidden := outcome.NewTransient(cairnv1.ReasonApplyFailed, fmt.Errorf("Deployment/team-a/web: failed to read before applying: %w", denied))
	other := outcome.NewTransient(cairnv1.ReasonApplyFailed, errors.New("connection refused"))
	tests := []struct {
		name, sa, defaultSA string
		in                  *outcome.Failure
		explained           bool
	}{
		{name: "no failure", in: nil},
		{name: "denied as cairn", in: forbidden, explained: true},
		{name: "denied as the instance's ServiceAccount", sa: "deployer", in: forbidden},
		{name: "denied as the Platform's default", defaultSA: "deployer", in: forbidden},
		{name: "another failure as cairn", in: other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := &cairnv1.Platform{Spec: cairnv1.PlatformSpec{DefaultServiceAccount: tt.defaultSA}}
			in := &revisionInput{platform: p, set: &declarations.Set{}}
			mi := &cairnv1.ModuleInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
				Spec: cairnv1.ModuleInstanceSpec{ServiceAccountName: tt.sa}}
			got := in.explainIdentity(mi, tt.in)
			if !tt.explained {
				g.Expect(got).To(BeIdenticalTo(tt.in))
				return
			}
			g.Expect(got.Kind).To(Equal(outcome.Stalled), "no hot retry: RBAC changes with an install")
			g.Expect(got.Reason).To(Equal(cairnv1.ReasonApplyFailed))
			g.Expect(got.Error()).To(ContainSubstring("applies as cairn itself"))
			g.Expect(got.Error()).To(ContainSubstring("name a ServiceAccount, or install cairn with --allow-apply-as-controller"))
			g.Expect(got.Error()).To(HaveSuffix(forbidden.Error()))
			g.Expect(apierrors.IsForbidden(got)).To(BeTrue())
		})
	}
}

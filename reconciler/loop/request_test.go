package loop

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestPlanRequestsAreReadFromTheirAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        []int
	}{
		{name: "none", annotations: map[string]string{cairnv1.ReconcileRequestAnnotation: "now"}},
		{name: "sorted", annotations: map[string]string{"plan.cairn.dev/pr-12": "t", "plan.cairn.dev/pr-3": "t"}, want: []int{3, 12}},
		{name: "not a number, or not positive", annotations: map[string]string{"plan.cairn.dev/pr-x": "t", "plan.cairn.dev/pr-0": "t", "plan.cairn.dev/pr--1": "t"}},
		{name: "another prefix", annotations: map[string]string{"other.dev/pr-4": "t", "4": "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &cairnv1.Platform{}
			p.Annotations = tt.annotations
			NewWithT(t).Expect(PlanRequests(p)).To(Equal(tt.want))
		})
	}
}

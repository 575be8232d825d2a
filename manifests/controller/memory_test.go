package controller

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// flagValue is the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// goMemLimit parses a GOMEMLIMIT value of the form <n>MiB.
func goMemLimit(g *WithT, env []corev1.EnvVar) int64 {
	for _, e := range env {
		if e.Name == "GOMEMLIMIT" {
			g.Expect(e.Value).To(HaveSuffix("MiB"))
			n, err := strconv.ParseInt(strings.TrimSuffix(e.Value, "MiB"), 10, 64)
			g.Expect(err).NotTo(HaveOccurred())
			return n << 20
		}
	}
	g.Expect("GOMEMLIMIT").To(BeEmpty(), "GOMEMLIMIT is set")
	return 0
}

// TestDeploymentMemoryFits: the render workers of the generated Deployment (their
// number times the budget of each, from its args) and the controller's own share
// (GOMEMLIMIT) together fit in the container's memory limit; at least two renders
// can run at once, each with the Platform's default renderMemory.
func TestDeploymentMemoryFits(t *testing.T) {
	g := NewWithT(t)
	objs, err := Objects(testOptions())
	g.Expect(err).NotTo(HaveOccurred())
	c := find[*appsv1.Deployment](objs, Name).Spec.Template.Spec.Containers[0]
	limit := c.Resources.Limits.Memory().Value()
	workers, err := strconv.Atoi(flagValue(c.Args, "--render-workers"))
	g.Expect(err).NotTo(HaveOccurred(), "--render-workers in %v", c.Args)
	q := resource.MustParse(flagValue(c.Args, "--render-memory"))
	budget := q.Value()
	own := goMemLimit(g, c.Env)

	g.Expect(workers).To(BeNumerically(">=", 2))
	g.Expect(budget).To(Equal(int64(512<<20)), "the Platform's default renderMemory")
	g.Expect(own).To(BeNumerically(">=", 256<<20), "room for the controller and its in-process renders")
	g.Expect(int64(workers)*budget+own).To(BeNumerically("<=", limit),
		"%d workers × %d + GOMEMLIMIT %d exceed the limit %d", workers, budget, own, limit)
	g.Expect(c.Resources.Requests.Memory().Value()).To(BeNumerically("<=", limit))
}

// TestFitRenderWorkers: sizings that fit are kept; one that does not runs fewer
// workers, then one worker with what is left beside the controller; a limit that
// leaves too little is refused; an unknown limit keeps what was asked.
func TestFitRenderWorkers(t *testing.T) {
	const mi, gi = int64(1 << 20), int64(1 << 30)
	tests := []struct {
		name  string
		want  RenderSizing
		limit int64
		got   RenderSizing
		why   string
		err   string
	}{
		{"fits", RenderSizing{3, 512 * mi}, 2 * gi, RenderSizing{3, 512 * mi}, "", ""},
		{"no limit known", RenderSizing{16, 512 * mi}, 0, RenderSizing{16, 512 * mi}, "", ""},
		{"four of 512Mi in 2Gi: three", RenderSizing{4, 512 * mi}, 2 * gi, RenderSizing{3, 512 * mi},
			"4 render workers of 512Mi and the controller's own 512Mi exceed the container's memory limit of 2Gi", ""},
		{"one of 1Gi in 1Gi: the rest", RenderSizing{2, gi}, gi, RenderSizing{1, 512 * mi}, "exceed the container's memory limit of 1Gi", ""},
		{"too little", RenderSizing{1, 512 * mi}, 560 * mi, RenderSizing{1, 512 * mi}, "",
			"the container's memory limit of 560Mi leaves less than 64Mi for one render worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, why, err := FitRenderWorkers(tt.want, tt.limit)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.got))
			if tt.why == "" {
				g.Expect(why).To(BeEmpty())
			} else {
				g.Expect(why).To(ContainSubstring(tt.why))
			}
			if tt.limit > 0 {
				g.Expect(got.Total() + ControllerMemory).To(BeNumerically("<=", tt.limit))
			}
		})
	}
}

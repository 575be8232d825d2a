package reconciler

import (
	"testing"
	"testing/fstest"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/cairn/render/declarations"
)

// limitsRepo has a Platform with render limits, a tenant team-a that tightens the
// memory budget, an instance of the Platform (ops/tool) and one of team-a.
var limitsRepo = fstest.MapFS{
	"platform.yaml": {Data: []byte(`apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  limits: {renderMemory: 256Mi, maxModuleBytes: 1Mi}
  tenants:
    - name: team-a
      paths: ["tenants/team-a/**"]
      namespaces: [team-a]
      serviceAccount: deployer
      limits: {renderMemory: 64Mi, maxModuleBytes: 4Mi}
`)},
	"instances/tool.yaml":     {Data: []byte(instanceDoc("tool", "ops"))},
	"tenants/team-a/web.yaml": {Data: []byte(instanceDoc("web", "team-a"))},
	"modules/app/main.cue":    {Data: []byte("package app\n")},
}

func instanceDoc(name, ns string) string {
	return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
		"\nspec:\n  module: {local: {path: ./modules/app}}\n"
}

// TestRenderLimits: the memory budget and the module cap of a render come from the
// Platform's limits, tightened (never loosened) by the instance's tenant.
func TestRenderLimits(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	tests := []struct {
		ns, name            string
		memory, moduleBytes int64
	}{
		{"ops", "tool", 256 << 20, 1 << 20},
		{"team-a", "web", 64 << 20, 1 << 20},
	}
	for _, tt := range tests {
		mi := set.Instance(tt.ns, tt.name)
		g.Expect(mi).NotTo(BeNil(), "%s/%s: %v", tt.ns, tt.name, set.Invalid)
		l := renderLimits(set, mi, DefaultOptions())
		g.Expect(l.Memory).To(Equal(tt.memory), tt.name)
		g.Expect(l.MaxModuleBytes).To(Equal(tt.moduleBytes), tt.name)
		g.Expect(l.Timeout).To(Equal(DefaultOptions().RenderLimits.Timeout), tt.name)
	}
}

// TestRenderLimitsTimeout: spec.timeout bounds the render when it is the shorter, and
// never lengthens the render's own deadline.
func TestRenderLimitsTimeout(t *testing.T) {
	g := NewWithT(t)
	set, err := declarations.Load(limitsRepo, declarations.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	opts := DefaultOptions()
	opts.RenderLimits.Timeout = 30 * time.Second
	for _, tc := range []struct {
		timeout *metav1.Duration
		want    time.Duration
	}{
		{nil, 30 * time.Second},
		{&metav1.Duration{Duration: 5 * time.Second}, 5 * time.Second},
		{&metav1.Duration{Duration: 10 * time.Minute}, 30 * time.Second},
	} {
		mi := set.Instance("ops", "tool").DeepCopy()
		mi.Spec.Timeout = tc.timeout
		g.Expect(renderLimits(set, mi, opts).Timeout).To(Equal(tc.want), "%v", tc.timeout)
	}
}

package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render"
)

// TestModuleKindsAnswerForTheirModule: each kind of module says what the engine
// needs of it, so that no other file checks which field of spec.module is set.
func TestModuleKindsAnswerForTheirModule(t *testing.T) {
	caps := &clusterCapabilities{digest: "sha256:all", caps: &render.Capabilities{KubeVersion: "v1.37.2"}}
	catalogs := cairnv1.PlatformSpec{Catalogs: []cairnv1.Catalog{{Module: "example.com/cat", Version: "v1.0.0"}}}
	for _, tc := range []struct {
		name         string
		module       cairnv1.ModuleSource
		label        string
		registry     bool // renders with the module registry
		usesRegistry [2]bool
		oci, timoni  bool
		capabilities string
		hooks        bool
		pulled       *render.CUEModuleRef
		sourceChange string
	}{
		{name: "a CUE module of the registry", module: cairnv1.ModuleSource{CUE: &cairnv1.CUEModule{Path: "example.com/app", Version: "v1.2.3"}},
			label: "cue", registry: true, usesRegistry: [2]bool{true, true}, pulled: &render.CUEModuleRef{Path: "example.com/app", Version: "v1.2.3"}},
		{name: "a local CUE module", module: cairnv1.ModuleSource{Local: &cairnv1.LocalModule{Path: "./modules/app"}},
			label: "local", registry: true, usesRegistry: [2]bool{false, true}, sourceChange: "local module changed"},
		{name: "a chart", module: cairnv1.ModuleSource{Chart: &cairnv1.ChartSource{URL: "oci://registry.example.com/charts/app", Version: "1.0.0"}},
			label: "helm", oci: true, capabilities: "sha256:all", hooks: true},
		{name: "a Timoni module of the repository", module: cairnv1.ModuleSource{Timoni: &cairnv1.TimoniModule{Path: "./timoni/app"}},
			label: "timoni", capabilities: digestJSON(map[string]string{"kubeVersion": "v1.37.2"}), sourceChange: "Timoni module directory changed"},
		{name: "a Timoni module of a registry", module: cairnv1.ModuleSource{Timoni: &cairnv1.TimoniModule{URL: "oci://registry.example.com/modules/app", Version: "1.0.0"}},
			label: "timoni", oci: true, timoni: true, capabilities: digestJSON(map[string]string{"kubeVersion": "v1.37.2"}), sourceChange: "Timoni module directory changed"},
		{name: "a kustomize directory", module: cairnv1.ModuleSource{Kustomize: &cairnv1.KustomizeModule{Path: "./apps/prod/"}},
			label: "kustomize", usesRegistry: [2]bool{false, true}, sourceChange: "kustomize directory or one of its bases changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			k := moduleKindOf(&cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: tc.module}})
			g.Expect(k).NotTo(BeNil())
			g.Expect(k.label()).To(Equal(tc.label))
			g.Expect(k.rendersWithRegistry()).To(Equal(tc.registry))
			g.Expect([2]bool{k.usesModuleRegistry(cairnv1.PlatformSpec{}), k.usesModuleRegistry(catalogs)}).To(Equal(tc.usesRegistry),
				"without catalogs, with catalogs")
			_, timoni, ok, err := k.oci()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect([2]bool{ok, timoni}).To(Equal([2]bool{tc.oci, tc.timoni}))
			g.Expect(k.capabilities(caps)).To(Equal(tc.capabilities))
			g.Expect(k.capabilities(nil)).To(BeEmpty(), "no capabilities discovered, no digest")
			g.Expect(k.seesCluster()).To(Equal(tc.capabilities != ""))
			g.Expect(k.hooks()).To(Equal(tc.hooks))
			g.Expect(k.registryModule()).To(Equal(tc.pulled))
			g.Expect(k.sourceChange()).To(Equal(tc.sourceChange))

			var req render.Request
			reg := &render.ModuleRegistry{}
			k.request(&req, nil, reg)
			g.Expect(req.Registry == reg).To(Equal(tc.registry), "only CUE modules are given the registry")
		})
	}
	g := NewWithT(t)
	g.Expect(moduleKindOf(&cairnv1.ModuleInstance{})).To(BeNil(), "a CR that names no module has no kind")
	g.Expect(moduleType(&cairnv1.ModuleInstance{})).To(Equal("other"))
}

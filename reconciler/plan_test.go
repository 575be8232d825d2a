package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/render/declarations"
)

func TestChangesTouches(t *testing.T) {
	g := NewWithT(t)
	c := newChanges(Revision{Changed: []string{"platform/instances/a.yaml", "platform/modules/app/app.cue", "other/x"}}, "platform")
	g.Expect(c.touches("instances/a.yaml")).To(BeTrue())
	g.Expect(c.touches("./modules/app")).To(BeTrue())
	g.Expect(c.touches("modules/ap")).To(BeFalse())
	g.Expect(c.touches("instances/b.yaml")).To(BeFalse())
	g.Expect(newChanges(Revision{}, ".").touches("anything")).To(BeTrue(), "an unknown diff touches everything")
	g.Expect(newChanges(Revision{Changed: []string{}}, ".").touches("a")).To(BeFalse())

}

func TestCleanKustomize(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{".": ".", "./": ".", "apps/prod": "apps/prod", "./apps/prod/": "apps/prod"} {
		g.Expect(cleanKustomize(in)).To(Equal(want), in)
	}
}

func TestRemovalOrderPutsDependentsFirst(t *testing.T) {
	g := NewWithT(t)
	mk := func(name string, deps ...string) *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{}
		mi.Namespace, mi.Name = "ns", name
		for _, d := range deps {
			mi.Spec.DependsOn = append(mi.Spec.DependsOn, cairnv1.InstanceReference{Name: d})
		}
		return mi
	}
	order := removalOrder([]*cairnv1.ModuleInstance{mk("base"), mk("web", "redis"), mk("redis", "base")})
	var names []string
	for _, mi := range order {
		names = append(names, mi.Name)
	}
	g.Expect(names).To(Equal([]string{"web", "redis", "base"}))
}

func TestInventoryRoundTripsThroughSecretEncoding(t *testing.T) {
	g := NewWithT(t)
	in := inv("a_b__ConfigMap", "_c__Namespace").Entries()
	data, err := apply.EncodeGzipJSON(in)
	g.Expect(err).NotTo(HaveOccurred())
	var out []cairnv1.InventoryEntry
	g.Expect(apply.DecodeGzipJSON(data, &out)).To(Succeed())
	g.Expect(out).To(Equal(in))
}

func TestUsedRegistries(t *testing.T) {
	reg := func(name, host string) *cairnv1.Registry {
		r := &cairnv1.Registry{}
		r.Name, r.Spec.Hostname = name, host
		return r
	}
	regs := []*cairnv1.Registry{reg("charts", "charts.example.com:5000"), reg("modules", "modules.example.com"),
		reg("other", "other.example.com"), reg("rendered", "rendered.example.com")}
	chart := cairnv1.ModuleSource{Chart: &cairnv1.ChartSource{URL: "oci://charts.example.com:5000/hello", Version: "0.1.0"}}
	cue := cairnv1.ModuleSource{CUE: &cairnv1.CUEModule{Path: "example.com/m@v0", Version: "v0.1.0"}}
	local := cairnv1.ModuleSource{Local: &cairnv1.LocalModule{Path: "./m"}}
	catalogs := []cairnv1.Catalog{{Module: "example.com/catalog@v0", Version: "v0.1.0"}}
	publish := &cairnv1.PublishTarget{Registry: "rendered", Repository: "r"}
	cases := []struct {
		name     string
		module   cairnv1.ModuleSource
		catalogs []cairnv1.Catalog
		publish  *cairnv1.PublishTarget
		want     []string
	}{
		{"chart: the registry of its host", chart, catalogs, nil, []string{"charts"}},
		{"cue module: the module registry", cue, nil, nil, []string{"modules"}},
		{"local module without catalogs: none", local, nil, nil, nil},
		{"local module with catalogs: the module registry", local, catalogs, nil, []string{"modules"}},
		{"publishing adds the publish registry", chart, nil, publish, []string{"charts", "rendered"}},
		{"chart of an undeclared host: none", cairnv1.ModuleSource{Chart: &cairnv1.ChartSource{URL: "oci://elsewhere/x", Version: "1"}}, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := &declarations.Set{Platform: &cairnv1.Platform{}, Registries: regs}
			set.Platform.Spec.ModuleRegistry, set.Platform.Spec.Catalogs, set.Platform.Spec.Render.Publish = "modules", c.catalogs, c.publish
			mi := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: c.module}}
			var names []string
			for _, r := range usedRegistries(set, mi) {
				names = append(names, r.Name)
			}
			NewWithT(t).Expect(names).To(Equal(c.want))
		})
	}
}

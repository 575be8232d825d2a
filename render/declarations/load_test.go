package declarations

import (
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestLoadRealisticRepository(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, realistic())

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(set.Unparsed).To(BeEmpty())
	g.Expect(set.Platform).NotTo(BeNil())
	g.Expect(set.Platform.Spec.ModuleRegistry).To(Equal("internal"))
	g.Expect(set.Registries).To(HaveLen(1))
	g.Expect(set.Registry("internal").Spec.Hostname).To(Equal("registry.example.com:5000"))
	g.Expect(set.Registry("missing")).To(BeNil())
	g.Expect(names(set)).To(Equal([]string{"infra/cert-manager", "team-a/podinfo", "team-a/frontend"}))

	podinfo := set.Instance("team-a", "podinfo")
	g.Expect(podinfo).NotTo(BeNil())
	g.Expect(podinfo.Spec.Module.CUE.Version).To(Equal("v0.4.0"))
	g.Expect(string(podinfo.Spec.Values.Raw)).To(MatchJSON(`{"replicas":2,"ingress":{"host":"podinfo.example.com"}}`))
	g.Expect(podinfo.Spec.Timeout.Duration.String()).To(Equal("5m0s"))
	g.Expect(podinfo.Spec.Secrets[0].Data["password"].Random.Length).To(BeEquivalentTo(32))
	g.Expect(podinfo.Labels).To(HaveKeyWithValue("app.kubernetes.io/part-of", "demo"))
	g.Expect(podinfo.Kind).To(Equal(cairnv1.ModuleInstanceKind))

	g.Expect(set.Origins).To(Equal(map[string]Origin{
		"Platform//cluster":                 {File: "platform.yaml", Line: 1},
		"Registry//internal":                {File: "platform.yaml", Line: 24},
		"ModuleInstance/infra/cert-manager": {File: "instances/infra/cert.yml", Line: 1},
		"ModuleInstance/team-a/podinfo":     {File: "instances/team-a/apps.yaml", Line: 1},
		"ModuleInstance/team-a/frontend":    {File: "instances/team-a/apps.yaml", Line: 23},
	}))
}

func TestLoadAppliesNoDefaults(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, realistic())

	frontend := set.Instance("team-a", "frontend")
	g.Expect(frontend.Spec.Prune).To(BeNil())
	g.Expect(frontend.Spec.Wait).To(BeNil())
	g.Expect(frontend.Spec.Drift).To(BeEmpty())
	g.Expect(frontend.Spec.Values).To(BeNil())
	g.Expect(set.Instance("team-a", "podinfo").Spec.DependsOn[0].Namespace).To(Equal("infra"))
	g.Expect(frontend.Spec.DependsOn[0].Namespace).To(BeEmpty(), "the referrer's namespace is implied, not written in")
}

func TestLoadOrdersByDependsOnThenName(t *testing.T) {
	g := NewWithT(t)
	fsys := withPlatform(`allow: ["team-*", "infra"]`, `allow: ["team*", "infra"]`)
	fsys["instances/more.yaml"] = &fstest.MapFile{Data: []byte(instanceDoc("team-b", "zeta", "  module: {local: {path: modules/z}}") + "---\n" +
		instanceDoc("team-b", "alpha", "  module: {local: {path: modules/a}}", "  dependsOn: [{name: zeta}]") + "---\n" +
		instanceDoc("team-a", "zz", "  module: {local: {path: modules/zz}}") + "---\n" +
		instanceDoc("team", "a", "  module: {local: {path: modules/zz}}"))}
	set := mustLoad(t, fsys)

	g.Expect(set.Invalid).To(BeEmpty())
	// Ties are broken by namespace, then name: team < team-a < team-b.
	g.Expect(names(set)).To(Equal([]string{
		"infra/cert-manager", "team/a", "team-a/podinfo", "team-a/frontend", "team-a/zz", "team-b/zeta", "team-b/alpha",
	}))
}

func TestLoadReadsOnlyPath(t *testing.T) {
	g := NewWithT(t)
	fsys := realistic()
	for name, f := range realistic() {
		fsys["deploy/"+name] = f
	}
	fsys["instances/team-a/apps.yaml"].Data = []byte("not: [valid")

	set, err := Load(fsys, Options{Path: "deploy"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Unparsed).To(BeEmpty())
	g.Expect(set.Origins["ModuleInstance/team-a/podinfo"]).To(Equal(Origin{File: "deploy/instances/team-a/apps.yaml", Line: 1}))
	g.Expect(set.Instances).To(HaveLen(3))
}

func TestLoadRejectsBadPath(t *testing.T) {
	for _, p := range []string{"../elsewhere", "/abs", "missing", "platform.yaml"} {
		t.Run(p, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Load(realistic(), Options{Path: p})
			var e *Error
			g.Expect(err).To(BeAssignableToTypeOf(e))
			g.Expect(err.(*Error).Reason).To(Equal(ReasonInvalidPath))
		})
	}
}

func TestDependentsAreTransitive(t *testing.T) {
	g := NewWithT(t)
	fsys := with(map[string]string{
		"instances/extra.yaml": instanceDoc("team-a", "broken", "  module: {local: {path: /abs}}", "  dependsOn: [{name: frontend}]") + "---\n" +
			instanceDoc("team-a", "behind-broken", "  module: {local: {path: x}}", "  dependsOn: [{name: broken}]"),
	})
	set := mustLoad(t, fsys)

	g.Expect(set.Instance("team-a", "broken")).To(BeNil())
	g.Expect(set.Instance("team-a", "behind-broken")).NotTo(BeNil(), "depending on an invalid instance leaves an instance valid")
	var deps []string
	for _, mi := range set.Dependents("infra", "cert-manager") {
		deps = append(deps, mi.Namespace+"/"+mi.Name)
	}
	// behind-broken has no valid dependency left, so it sorts before podinfo.
	g.Expect(deps).To(Equal([]string{"team-a/behind-broken", "team-a/podinfo", "team-a/frontend"}))
	g.Expect(set.Dependents("team-a", "frontend")).To(HaveLen(1))
	g.Expect(set.Dependents("team-a", "behind-broken")).To(BeEmpty())
}

func TestErrorFormat(t *testing.T) {
	g := NewWithT(t)
	e := &Error{Reason: ReasonInvalidDeclaration, File: "instances/podinfo.yaml", Line: 12,
		Kind: "ModuleInstance", Object: "team-a/podinfo", Field: "spec.valuez", Message: "unknown field"}
	g.Expect(e.Error()).To(Equal("instances/podinfo.yaml:12: ModuleInstance team-a/podinfo: spec.valuez: unknown field"))
	g.Expect((&Error{File: "a.yaml", Message: "invalid YAML: x"}).Error()).To(Equal("a.yaml: invalid YAML: x"))
	g.Expect((&Error{Kind: "Platform", Message: "no Platform"}).Error()).To(Equal("Platform: no Platform"))
	g.Expect(Key("Platform", "", "cluster")).To(Equal("Platform//cluster"))
}

package declarations

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestInvalidInstance covers every rule of a ModuleInstance: the instance is left out,
// the rest of the repository loads, and the problem names the file, line and field.
func TestInvalidInstance(t *testing.T) {
	const cue = "  module: {cue: {path: example.com/m@v0, version: v0.1.0}}"
	cases := []struct {
		name      string
		namespace string
		spec      []string
		reason    string
		line      int
		field     string
		message   string
	}{
		{name: "unknown spec field", spec: []string{cue, "  valuez: {}"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.valuez", message: "unknown field"},
		{name: "unknown nested field", spec: []string{"  module:", "    cue:", "      path: example.com/m@v0", "      paht: example.com/m@v0", "      version: v0.1.0"},
			reason: ReasonInvalidDeclaration, line: 10, field: "spec.module.cue.paht", message: "unknown field"},
		{name: "unknown field in a list item", spec: []string{cue, "  dependsOn:", "    - name: podinfo", "      nmespace: team-a"},
			reason: ReasonInvalidDeclaration, line: 10, field: "spec.dependsOn[0].nmespace", message: "unknown field"},
		{name: "status", spec: []string{cue, "status: {failures: 1}"},
			reason: ReasonInvalidDeclaration, line: 8, field: "status", message: "status is written by cairn"},
		{name: "wrong type", spec: []string{cue, "  suspend: sometimes"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.suspend", message: "cannot be string"},
		{name: "duplicate key", spec: []string{cue, "  drift: Warn", "  drift: Ignore"},
			reason: ReasonInvalidDeclaration, line: 9, field: "spec.drift", message: `duplicate key "drift"`},
		{name: "no module", spec: []string{"  drift: Warn"},
			reason: ReasonInvalidModule, line: 6, field: "spec.module", message: "exactly one of cue, chart, local, kustomize or timoni"},
		{name: "two modules", spec: []string{"  module:", "    cue: {path: example.com/m@v0, version: v0.1.0}", "    local: {path: m}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module", message: "found 2"},
		{name: "cue version not exact", spec: []string{"  module: {cue: {path: example.com/m@v0, version: latest}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.cue.version", message: "not an exact version"},
		{name: "cue path without major", spec: []string{"  module: {cue: {path: example.com/m, version: v0.1.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.cue.path", message: "major version"},
		{name: "local path escapes", spec: []string{"  module:", "    local:", "      path: ../../etc"},
			reason: ReasonInvalidModule, line: 9, field: "spec.module.local.path", message: "must not contain .."},
		{name: "local path escapes in the middle", spec: []string{"  module: {local: {path: ./a/../../b}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.local.path", message: "must not contain .."},
		{name: "local path absolute", spec: []string{"  module: {local: {path: /srv/modules}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.local.path", message: "relative"},
		{name: "local path not clean", spec: []string{"  module: {local: {path: modules//a/}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.local.path", message: "clean"},
		{name: "kustomize path escapes", spec: []string{"  module: {kustomize: {path: ../apps}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.kustomize.path", message: "must not contain .."},
		{name: "kustomize with values", spec: []string{"  module: {kustomize: {path: ./apps/prod}}", "  values: {replicas: 2}"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.values", message: "not available for a kustomize directory"},
		{name: "kustomize with valuesFrom", spec: []string{"  module: {kustomize: {path: apps/prod/}}", "  valuesFrom:", "    - secretRef: {name: s, key: k}"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.valuesFrom", message: "not available for a kustomize directory"},
		{name: "timoni path and url", spec: []string{"  module: {timoni: {path: ./modules/redis, url: 'oci://r.example.com/redis', version: 1.0.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni", message: "exactly one of path"},
		{name: "timoni neither", spec: []string{"  module: {timoni: {version: 1.0.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni", message: "exactly one of path"},
		{name: "timoni path escapes", spec: []string{"  module: {timoni: {path: ../redis}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni.path", message: "must not contain .."},
		{name: "timoni path with version", spec: []string{"  module: {timoni: {path: ./redis, version: 1.0.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni", message: "0.0.0-devel"},
		{name: "timoni url not oci", spec: []string{"  module: {timoni: {url: 'https://r.example.com/redis', version: 1.0.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni.url", message: "oci://host/repository"},
		{name: "timoni url without version", spec: []string{"  module: {timoni: {url: 'oci://r.example.com/redis'}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni.version", message: "required with url"},
		{name: "timoni bad version", spec: []string{"  module: {timoni: {url: 'oci://r.example.com/redis', version: '1.0/0'}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni.version", message: "not a valid OCI tag"},
		{name: "timoni bad digest", spec: []string{"  module: {timoni: {url: 'oci://r.example.com/redis', digest: 'sha256:abc'}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.timoni.digest", message: "not a sha256 or sha512 digest"},
		{name: "chart not oci", spec: []string{"  module: {chart: {url: 'https://charts.example.com/podinfo', version: 6.7.0}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.chart.url", message: "oci://host/repository"},
		{name: "chart digest", spec: []string{"  module: {chart: {url: 'oci://r.example.com/podinfo', digest: 'sha256:abc'}}"},
			reason: ReasonInvalidModule, line: 7, field: "spec.module.chart.digest", message: "digest"},
		{name: "dangling dependsOn", spec: []string{cue, "  dependsOn:", "    - {name: podinfo}", "    - {name: nginx, namespace: team-b}"},
			reason: ReasonDanglingReference, line: 10, field: "spec.dependsOn[1]", message: "ModuleInstance team-b/nginx is not declared"},
		{name: "values not an object", spec: []string{cue, "  values: [1, 2]"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.values", message: "must be an object"},
		{name: "drift enum", spec: []string{cue, "  drift: Revert"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.drift", message: `unsupported value "Revert"`},
		{name: "duration does not parse", spec: []string{cue, "  values: {timeout: soon}", "  timeout: 5x"},
			reason: ReasonInvalidDeclaration, line: 9, field: "spec.timeout", message: `invalid duration "5x"`},
		{name: "merge key", spec: []string{cue, "  values:", "    <<: {a: 1}"},
			reason: ReasonInvalidDeclaration, line: 9, field: "spec.values", message: "merge keys (<<) are not supported"},
		{name: "infinite number", spec: []string{cue, "  values:", "    a: [1, .inf]"},
			reason: ReasonInvalidDeclaration, line: 9, field: "spec.values.a[1]", message: "cannot be represented in JSON"},
		{name: "timeout zero", spec: []string{cue, "  timeout: 0s"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.timeout", message: "greater than zero"},
		{name: "service account", spec: []string{cue, "  serviceAccountName: Deployer!"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.serviceAccountName", message: "invalid"},
		{name: "denied namespace", namespace: "kube-system", spec: []string{cue},
			reason: ReasonNamespaceDenied, line: 5, field: "metadata.namespace", message: `denied by the Platform's pattern "kube-*"`},
		{name: "namespace not allowed", namespace: "payments", spec: []string{cue},
			reason: ReasonNamespaceDenied, line: 5, field: "metadata.namespace", message: `none of the Platform's allowed patterns ["team-*" "infra"]`},
		{name: "secret copied to a denied namespace", spec: []string{cue, "  secrets:", "    - name: s", "      data: {k: {random: {length: 8}}}", "      toNamespaces: [team-b, kube-public]"},
			reason: ReasonNamespaceDenied, line: 11, field: "spec.secrets[0].toNamespaces[1]", message: `"kube-public" is denied`},
		{name: "secret random length", spec: []string{cue, "  secrets:", "    - name: s", "      data:", "        k: {random: {length: 0}}"},
			reason: ReasonInvalidDeclaration, line: 11, field: "spec.secrets[0].data.k.random.length", message: "between 1 and 4096"},
		{name: "secret without generator", spec: []string{cue, "  secrets: [{name: s}]"},
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.secrets[0]", message: "needs data or tls"},
		{name: "once secret that rotates", spec: []string{cue, "  secrets:", "    - name: s", "      once: true", "      rotateAfter: 1h", "      data: {k: {random: {length: 8}}}"},
			reason: ReasonInvalidDeclaration, line: 11, field: "spec.secrets[0].rotateAfter", message: "remove once or rotateAfter"},
		{name: "secret data key written by tls", spec: []string{cue, "  secrets:", "    - name: s", "      tls: {commonName: a.svc}", "      data:", "        tls.key: {random: {length: 8}}"},
			reason: ReasonInvalidDeclaration, line: 12, field: "spec.secrets[0].data.tls.key", message: "is written by tls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := tc.namespace
			if ns == "" {
				ns = "team-a"
			}
			set := mustLoad(t, with(map[string]string{"instances/x.yaml": instanceDoc(ns, "x", tc.spec...)}))

			g.Expect(set.Instance(ns, "x")).To(BeNil())
			g.Expect(set.Instances).To(HaveLen(3), "the other instances still load")
			g.Expect(set.Unparsed).To(BeEmpty())
			errs := errorsIn(set, "instances/x.yaml")
			g.Expect(errs).To(HaveLen(1))
			e := errs[0]
			g.Expect(e.Reason).To(Equal(tc.reason))
			g.Expect(e.Line).To(Equal(tc.line))
			g.Expect(e.Field).To(Equal(tc.field))
			g.Expect(e.Kind).To(Equal("ModuleInstance"))
			g.Expect(e.Object).To(Equal(ns + "/x"))
			g.Expect(e.Message).To(ContainSubstring(tc.message))
			g.Expect(e.Error()).To(HavePrefix("instances/x.yaml:%d: ModuleInstance %s/x: ", tc.line, ns))
		})
	}
}

func TestValidInstanceVariants(t *testing.T) {
	for name, spec := range map[string][]string{
		"local with ./":        {"  module: {local: {path: ./modules/x}}"},
		"local root":           {"  module: {local: {path: .}}"},
		"kustomize root .":     {"  module: {kustomize: {path: .}}"},
		"kustomize root ./":    {"  module: {kustomize: {path: ./}}"},
		"chart with digest":    {"  module: {chart: {url: 'oci://r.example.com:5000/charts/x', digest: 'sha256:" + sha256Hex + "'}}"},
		"values null":          {"  module: {local: {path: x}}", "  values: null"},
		"dependsOn own ns":     {"  module: {local: {path: x}}", "  dependsOn: [{name: podinfo}, {name: podinfo, namespace: team-a}]"},
		"anchors and aliases":  {"  module: {local: {path: &p x}}", "  values: {path: *p, list: &l [1, 2], again: *l}"},
		"yaml ints and floats": {"  module: {local: {path: x}}", "  values: {hex: 0x1F, big: 1e3, neg: -.5, date: 2001-12-14}"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, with(map[string]string{"instances/x.yaml": instanceDoc("team-a", "x", spec...)}))
			g.Expect(set.Invalid).To(BeEmpty())
			g.Expect(set.Instance("team-a", "x")).NotTo(BeNil())
		})
	}
}

const sha256Hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestChartURLCredentialsAreNotEchoed(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, with(map[string]string{"instances/x.yaml": instanceDoc("team-a", "x",
		"  module: {chart: {url: 'oci://bob:hunter2@r.example.com/podinfo', version: 1.0.0}}")}))

	errs := errorsIn(set, "instances/x.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonInvalidModule))
	g.Expect(errs[0].Error()).NotTo(ContainSubstring("hunter2"))
}

func TestInstanceValues(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, with(map[string]string{"instances/x.yaml": instanceDoc("team-a", "x",
		"  module: {local: {path: x}}", "  values: {hex: 0x1F, big: 1e3, on: yes, quoted: '12', none: ~, d: 2001-12-14, s: &a [a], t: *a}")}))

	g.Expect(string(set.Instance("team-a", "x").Spec.Values.Raw)).To(MatchJSON(
		`{"hex":31,"big":1000,"on":"yes","quoted":"12","none":null,"d":"2001-12-14","s":["a"],"t":["a"]}`))
}

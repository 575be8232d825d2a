package declarations

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestInstanceLimits covers the limits every instance obeys, under a tenant or not:
// the longest timeout and the grants needed to loosen the prune guards.
func TestInstanceLimits(t *testing.T) {
	cases := []struct {
		name, file, namespace, limits, extra string
		spec                                 []string
		field, message                       string
	}{
		{name: "timeout over the default maxTimeout", file: "instances/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  timeout: 10h"}, field: "spec.timeout",
			message: "10h0m0s exceeds the longest timeout allowed, 30m0s (the Platform's spec.limits.maxTimeout)"},
		{name: "timeout over the Platform's maxTimeout", file: "instances/app.yaml", namespace: "team-a", limits: "  limits: {maxTimeout: 5m}",
			spec: []string{localModule, "  timeout: 6m"}, field: "spec.timeout",
			message: "6m0s exceeds the longest timeout allowed, 5m0s (the Platform's spec.limits.maxTimeout)"},
		{name: "timeout over the tenant's maxTimeout", file: "tenants/team-a/app.yaml", namespace: "team-a", limits: "  limits: {maxTimeout: 12h}",
			extra: "      limits: {maxTimeout: 1h}", spec: []string{localModule, "  timeout: 2h"}, field: "spec.timeout",
			message: "2h0m0s exceeds the longest timeout allowed, 1h0m0s (tenant team-a: spec.tenants[0].limits.maxTimeout)"},
		{name: "pruneProtected without the grant", file: "instances/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  pruneProtected: true"}, field: "spec.pruneProtected",
			message: "not granted: the Platform's spec.limits.allowPruneProtected is not true"},
		{name: "pruneProtected granted by the Platform, not the tenant", file: "tenants/team-a/app.yaml", namespace: "team-a",
			limits: "  limits: {allowPruneProtected: true}", extra: "      limits: {allowPruneProtected: false}",
			spec: []string{localModule, "  pruneProtected: true"}, field: "spec.pruneProtected",
			message: "not granted: tenant team-a: spec.tenants[0].limits.allowPruneProtected is not true"},
		{name: "pruneProtected granted by the tenant, not the Platform", file: "tenants/team-a/app.yaml", namespace: "team-a",
			extra: "      limits: {allowPruneProtected: true}", spec: []string{localModule, "  pruneProtected: true"}, field: "spec.pruneProtected",
			message: "not granted: the Platform's spec.limits.allowPruneProtected is not true"},
		{name: "allowEmpty without the grant", file: "tenants/team-a/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  allowEmpty: true"}, field: "spec.allowEmpty",
			message: "not granted: the Platform's spec.limits.allowEmpty is not true"},
		{name: "valuesFrom without a key", file: "instances/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  valuesFrom: [{secretRef: {name: values}}]"}, field: "spec.valuesFrom[0].secretRef.key", message: "required"},
		{name: "valuesFrom with a bad key", file: "instances/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  valuesFrom: [{secretRef: {name: values, key: 'a/b'}}]"}, field: "spec.valuesFrom[0].secretRef.key", message: "invalid"},
		{name: "valuesFrom with a bad name", file: "instances/app.yaml", namespace: "team-a",
			spec: []string{localModule, "  valuesFrom: [{secretRef: {name: Values, key: v.yaml}}]"}, field: "spec.valuesFrom[0].secretRef.name", message: "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fsys := tenantRepo(tc.limits, tc.extra, map[string]string{tc.file: instanceDoc(tc.namespace, "app", tc.spec...)})
			set := mustLoad(t, fsys)

			errs := errorsIn(set, tc.file)
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Field).To(Equal(tc.field))
			g.Expect(errs[0].Line).To(Equal(8))
			g.Expect(errs[0].Message).To(ContainSubstring(tc.message))
			g.Expect(set.Instance(tc.namespace, "app")).To(BeNil())
		})
	}
}

func TestInstanceLimitsGranted(t *testing.T) {
	g := NewWithT(t)
	fsys := tenantRepo("  limits: {maxTimeout: 12h, allowPruneProtected: true, allowEmpty: true}", "      limits: {maxTimeout: 11h}", map[string]string{
		"instances/app.yaml":      instanceDoc("team-a", "app", localModule, "  timeout: 10h", "  pruneProtected: true", "  allowEmpty: true"),
		"tenants/team-a/app.yaml": instanceDoc("team-a", "tenant-app", localModule, "  timeout: 10h", "  pruneProtected: true", "  allowEmpty: true"),
		"tenants/team-b/app.yaml": instanceDoc("team-b", "app", localModule, "  valuesFrom: [{secretRef: {name: values, key: values.yaml}}]"),
	})
	set := mustLoad(t, fsys)

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(names(set)).To(ContainElements("team-a/app", "team-a/tenant-app", "team-b/app"))
}

// TestPerFileCaps: a file over its caps is unparsed on its own; the tenant's caps
// tighten the Platform's, and the Platform may allow files larger than the default.
func TestPerFileCaps(t *testing.T) {
	g := NewWithT(t)
	three := strings.Join([]string{instanceDoc("team-a", "x1", localModule), instanceDoc("team-a", "x2", localModule), instanceDoc("team-a", "x3", localModule)}, "---\n")
	big := instanceDoc("team-a", "big", localModule, "  values: {blob: '"+strings.Repeat("x", 2<<20)+"'}")
	files := map[string]string{
		"instances/three.yaml":      three,
		"instances/big.yaml":        big,
		"tenants/team-a/three.yaml": strings.ReplaceAll(three, "name: x", "name: a"),
		"tenants/team-a/big.yaml":   strings.Replace(big, "name: big", "name: abig", 1),
	}
	set := mustLoad(t, tenantRepo("  limits: {maxFileBytes: 4Mi}", "      limits: {maxFileDocuments: 2, maxFileBytes: 3Mi}", files))

	g.Expect(names(set)).To(ContainElements("team-a/x1", "team-a/x3", "team-a/big", "team-a/abig"),
		"the platform team's files are under the Platform's caps: a 2 MiB file is read once its cap is known")
	g.Expect(set.Unparsed).To(Equal([]string{"tenants/team-a/three.yaml"}))
	errs := errorsIn(set, "tenants/team-a/three.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(Equal("tenants/team-a/three.yaml:17: file holds more than 2 documents, the cap of tenant team-a: spec.tenants[0].limits.maxFileDocuments"))
	g.Expect(set.Instance("team-a", "a1")).To(BeNil())

	set = mustLoad(t, tenantRepo("  limits: {maxFileBytes: 4Mi}", "      limits: {maxFileDocuments: 2, maxFileBytes: 1Ki}", files))
	g.Expect(set.Unparsed).To(Equal([]string{"tenants/team-a/big.yaml", "tenants/team-a/three.yaml"}))
	errs = errorsIn(set, "tenants/team-a/big.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonTooLarge))
	g.Expect(errs[0].Error()).To(Equal("tenants/team-a/big.yaml: file is larger than 1024 bytes, the cap of tenant team-a: spec.tenants[0].limits.maxFileBytes"))
	g.Expect(names(set)).To(ContainElement("team-a/big"))
}

// TestDependencyInAnUnreadFileIsNotDangling: the dependents of an instance whose file
// is over its caps are not invalid: they wait for it, since the file may declare it.
func TestDependencyInAnUnreadFileIsNotDangling(t *testing.T) {
	g := NewWithT(t)
	junk := strings.Repeat("---\njunk: true\n", 3)
	set := mustLoad(t, tenantRepo("", "      limits: {maxFileDocuments: 2}", map[string]string{
		"tenants/team-a/base.yaml": junk,
		"tenants/team-b/app.yaml":  instanceDoc("team-b", "app", localModule, "  dependsOn: [{name: base, namespace: team-a}]"),
	}))

	g.Expect(set.Unparsed).To(Equal([]string{"tenants/team-a/base.yaml"}))
	g.Expect(errorsIn(set, "tenants/team-b/app.yaml")).To(BeEmpty())
	g.Expect(set.Instance("team-b", "app")).NotTo(BeNil())

	set = mustLoad(t, tenantRepo("", "", map[string]string{
		"tenants/team-b/app.yaml": instanceDoc("team-b", "app", localModule, "  dependsOn: [{name: base, namespace: team-a}]"),
	}))
	g.Expect(errorsIn(set, "tenants/team-b/app.yaml")).To(HaveLen(1), "with every file read, it is dangling")
}

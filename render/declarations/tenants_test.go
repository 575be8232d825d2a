package declarations

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// tenantsSpec declares two tenants; in platform.yaml its lines are 5 to 14.
const tenantsSpec = `spec:
  tenants:
    - name: team-a
      paths: ["tenants/team-a/**"]
      namespaces: [team-a, team-a-*]
      serviceAccount: deployer
    - name: team-b
      paths: ["tenants/team-b/**"]
      namespaces: [team-b, kube-b]
      serviceAccount: deployer`

const localModule = "  module: {local: {path: ./modules/frontend}}"

// tenantRepo returns the realistic repository with two tenants, extra lines for
// team-a's entry (indented by six spaces) and for the Platform's spec (by two), and
// files added.
func tenantRepo(extraSpec, teamA string, files map[string]string) fstest.MapFS {
	spec := tenantsSpec
	if teamA != "" {
		spec = strings.Replace(spec, "serviceAccount: deployer", "serviceAccount: deployer\n"+teamA, 1)
	}
	if extraSpec != "" {
		spec += "\n" + extraSpec
	}
	fsys := withPlatform("spec:", spec)
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	return fsys
}

// TestInvalidTenant covers every rule of spec.tenants, spec.limits and
// spec.clusterResources: each is fatal, like every Platform rule.
func TestInvalidTenant(t *testing.T) {
	cases := []struct {
		name, old, replacement string
		field, message         string
		line                   int
	}{
		{name: "duplicate name", old: "- name: team-b", replacement: "- name: team-a",
			line: 11, field: "spec.tenants[1].name", message: `tenant "team-a" is declared twice`},
		{name: "name not a DNS label", old: "- name: team-b", replacement: "- name: Team_B",
			line: 11, field: "spec.tenants[1].name", message: "invalid"},
		{name: "invalid glob", old: `paths: ["tenants/team-a/**"]`, replacement: `paths: ["tenants/[team-a/**"]`,
			line: 8, field: "spec.tenants[0].paths[0]", message: "not a valid glob"},
		{name: "absolute path", old: `paths: ["tenants/team-a/**"]`, replacement: `paths: ["/tenants/team-a/**"]`,
			line: 8, field: "spec.tenants[0].paths[0]", message: "must be relative"},
		{name: "path with ..", old: `paths: ["tenants/team-a/**"]`, replacement: `paths: ["tenants/../**"]`,
			line: 8, field: "spec.tenants[0].paths[0]", message: "no .."},
		{name: "no paths", old: `paths: ["tenants/team-a/**"]`, replacement: `paths: []`,
			line: 8, field: "spec.tenants[0].paths", message: "at least one path glob"},
		{name: "no namespaces", old: "namespaces: [team-a, team-a-*]", replacement: "namespaces: []",
			line: 9, field: "spec.tenants[0].namespaces", message: "at least one namespace pattern"},
		{name: "invalid namespace pattern", old: "namespaces: [team-a, team-a-*]", replacement: "namespaces: [team-a, 'team-[']",
			line: 9, field: "spec.tenants[0].namespaces[1]", message: "not a valid pattern"},
		{name: "no serviceAccount", old: "      serviceAccount: deployer\n    - name: team-b", replacement: "    - name: team-b",
			line: 7, field: "spec.tenants[0].serviceAccount", message: "required"},
		{name: "invalid serviceAccount", old: "serviceAccount: deployer", replacement: "serviceAccount: Deployer!",
			line: 10, field: "spec.tenants[0].serviceAccount", message: "invalid"},
		{name: "tenant clusterResources without kind", old: "serviceAccount: deployer", replacement: "serviceAccount: deployer\n      clusterResources: [{group: rbac.authorization.k8s.io}]",
			line: 11, field: "spec.tenants[0].clusterResources[0].kind", message: "required"},
		{name: "platform clusterResources without kind", old: "spec:", replacement: tenantsSpec + "\n  clusterResources:\n    - group: ''",
			line: 16, field: "spec.clusterResources[0].kind", message: "required"},
		{name: "maxFileDocuments zero", old: "spec:", replacement: tenantsSpec + "\n  limits:\n    maxFileDocuments: 0",
			line: 16, field: "spec.limits.maxFileDocuments", message: "at least 1"},
		{name: "maxTimeout zero", old: "spec:", replacement: tenantsSpec + "\n  limits:\n    maxTimeout: 0s",
			line: 16, field: "spec.limits.maxTimeout", message: "greater than zero"},
		{name: "tenant maxFileBytes zero", old: "serviceAccount: deployer", replacement: "serviceAccount: deployer\n      limits: {maxFileBytes: '0'}",
			line: 11, field: "spec.tenants[0].limits.maxFileBytes", message: "greater than zero"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			platform := strings.Replace(platformYAML, "spec:", tenantsSpec, 1)
			platform = strings.Replace(platform, tc.old, tc.replacement, 1)
			if tc.old == "spec:" {
				platform = strings.Replace(platformYAML, "spec:", tc.replacement, 1)
			}
			set, err := Load(with(map[string]string{"platform.yaml": platform + "---\n" + registryYAML}), Options{})

			var e *Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "got %v", err)
			g.Expect(e.Reason).To(Equal(ReasonInvalidDeclaration))
			g.Expect(e.Field).To(Equal(tc.field))
			g.Expect(e.Line).To(Equal(tc.line))
			g.Expect(e.Message).To(ContainSubstring(tc.message))
			g.Expect(e.Error()).To(HavePrefix("platform.yaml:%d: Platform cluster: %s", tc.line, tc.field))
			g.Expect(set.Platform).To(BeNil())
		})
	}
}

func TestTenantOwnsTheDeclarationsUnderItsPaths(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, tenantRepo("", "", map[string]string{
		"tenants/team-a/deep/app.yaml": instanceDoc("team-a-web", "app", localModule, "  serviceAccountName: deployer"),
		"tenants/team-b/app.yaml":      instanceDoc("team-b", "app", localModule),
	}))

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(set.Tenant("team-a-web", "app")).NotTo(BeNil())
	g.Expect(set.Tenant("team-a-web", "app").Name).To(Equal("team-a"), `"**" matches any number of directories`)
	g.Expect(set.Tenant("team-b", "app").Name).To(Equal("team-b"))
	g.Expect(set.Tenant("team-b", "app")).To(BeIdenticalTo(&set.Platform.Spec.Tenants[1]))
	g.Expect(set.Tenant("team-a", "podinfo")).To(BeNil(), "instances/ is the platform team's")
}

// TestTenantInstanceRules covers every rule an instance under a tenant's paths obeys:
// the instance is refused, the rest loads, and the problem names the rule, file, line
// and field.
func TestTenantInstanceRules(t *testing.T) {
	cases := []struct {
		name, namespace string
		spec            []string
		reason, field   string
		line            int
		message         string
		// refused: the instance is left out as if undeclared, so that it cannot mark
		// another's instance failed or make it a duplicate.
		refused bool
	}{
		{name: "namespace of another tenant", namespace: "team-b", spec: []string{localModule},
			reason: ReasonNamespaceDenied, field: "metadata.namespace", line: 5, refused: true,
			message: `tenant team-a: namespace "team-b" is not one of [team-a team-a-*] (ModuleInstance team-b/app is refused)`},
		{name: "namespace of the platform team", namespace: "infra", spec: []string{localModule},
			reason: ReasonNamespaceDenied, field: "metadata.namespace", line: 5, refused: true,
			message: `tenant team-a: namespace "infra" is not one of [team-a team-a-*] (ModuleInstance infra/app is refused)`},
		{name: "another ServiceAccount", namespace: "team-a", spec: []string{localModule, "  serviceAccountName: admin"},
			reason: ReasonTenantViolation, field: "spec.serviceAccountName", line: 8,
			message: `tenant team-a: must be empty or the tenant's ServiceAccount "deployer", not "admin"`},
		{name: "kustomize path outside the tenant's paths", namespace: "team-a", spec: []string{"  module: {kustomize: {path: ./tenants/team-b/app}}"},
			reason: ReasonTenantViolation, field: "spec.module.kustomize.path", line: 7,
			message: `tenant team-a: "./tenants/team-b/app" is outside the tenant's paths ["tenants/team-a/**"] (a kustomize path is relative to the repository root)`},
		{name: "kustomize path at the root", namespace: "team-a", spec: []string{"  module: {kustomize: {path: .}}"},
			reason: ReasonTenantViolation, field: "spec.module.kustomize.path", line: 7,
			message: `tenant team-a: "." is outside the tenant's paths ["tenants/team-a/**"] (a kustomize path is relative to the repository root)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, tenantRepo("", "", map[string]string{"tenants/team-a/app.yaml": instanceDoc(tc.namespace, "app", tc.spec...)}))

			errs := errorsIn(set, "tenants/team-a/app.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(tc.reason))
			g.Expect(errs[0].Field).To(Equal(tc.field))
			g.Expect(errs[0].Line).To(Equal(tc.line))
			g.Expect(errs[0].Message).To(Equal(tc.message))
			g.Expect(set.Instance(tc.namespace, "app")).To(BeNil())
			g.Expect(names(set)).To(ContainElements("team-a/podinfo", "infra/cert-manager"))
			if tc.refused {
				g.Expect(set.Origins).NotTo(HaveKey("ModuleInstance/" + tc.namespace + "/app"))
				g.Expect(errs[0].Object).To(BeEmpty())
				return
			}
			g.Expect(set.Origins).To(HaveKey("ModuleInstance/"+tc.namespace+"/app"), "its last good state is kept, not removed")
			g.Expect(errs[0].Object).To(Equal(tc.namespace + "/app"))
		})
	}
}

func TestTenantCannotShadowAnotherTenantsInstance(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, tenantRepo("", "", map[string]string{
		"tenants/team-b/app.yaml":  instanceDoc("team-b", "app", localModule),
		"tenants/team-a/grab.yaml": instanceDoc("team-b", "app", localModule, "  values: {grabbed: true}"),
	}))

	g.Expect(set.Instance("team-b", "app")).NotTo(BeNil(), "the victim is no duplicate")
	g.Expect(set.Instance("team-b", "app").Spec.Values).To(BeNil())
	g.Expect(set.Origins["ModuleInstance/team-b/app"].File).To(Equal("tenants/team-b/app.yaml"))
	g.Expect(errorsIn(set, "tenants/team-b/app.yaml")).To(BeEmpty())
	g.Expect(errorsIn(set, "tenants/team-a/grab.yaml")).To(HaveLen(1))
}

func TestTenantNamespaceStillPassesThePlatformPolicy(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, tenantRepo("", "", map[string]string{"tenants/team-b/app.yaml": instanceDoc("kube-b", "app", localModule)}))

	errs := errorsIn(set, "tenants/team-b/app.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonNamespaceDenied))
	g.Expect(errs[0].Message).To(Equal(`namespace "kube-b" is denied by the Platform's pattern "kube-*"`))
}

// TestOverlappingTenantsAreRefused: two tenants whose path globs match one file, or
// whose namespace patterns match one namespace, or a tenant pattern that matches
// cairn's namespace, make the Platform invalid, naming both tenants and an example.
func TestOverlappingTenantsAreRefused(t *testing.T) {
	cases := []struct {
		name, old, replacement, field, message string
		line                                   int
	}{
		{name: "paths", old: `"tenants/team-b/**"`, replacement: `"tenants/*/app.yaml"`, line: 12, field: "spec.tenants[1].paths[0]",
			message: `tenant team-b's "tenants/*/app.yaml" overlaps tenant team-a's "tenants/team-a/**" (spec.tenants[0]): both match file "tenants/team-a/app.yaml"; each file belongs to one tenant`},
		{name: "namespaces", old: "namespaces: [team-b, kube-b]", replacement: "namespaces: [team-b, team-a-pay]", line: 13, field: "spec.tenants[1].namespaces[1]",
			message: `tenant team-b's "team-a-pay" overlaps tenant team-a's "team-a-*" (spec.tenants[0]): both match namespace "team-a-pay"; each namespace belongs to one tenant`},
		{name: "namespace patterns", old: "namespaces: [team-b, kube-b]", replacement: "namespaces: ['team-*-prod']", line: 13, field: "spec.tenants[1].namespaces[0]",
			message: `tenant team-b's "team-*-prod" overlaps tenant team-a's "team-a-*" (spec.tenants[0]): both match namespace "team-a-prod"`},
		{name: "cairn's namespace", old: "namespaces: [team-b, kube-b]", replacement: "namespaces: [team-b, 'cairn-*']", line: 13, field: "spec.tenants[1].namespaces[1]",
			message: `tenant team-b: pattern "cairn-*" matches cairn's own namespace "cairn-system", which no instance may use`},
		{name: "glob with a trailing slash", old: `"tenants/team-b/**"`, replacement: `"tenants/team-b/"`, line: 12, field: "spec.tenants[1].paths[0]",
			message: `"tenants/team-b/": a glob matches files: it may not end in /`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fsys := tenantRepo("", "", map[string]string{"tenants/team-a/app.yaml": instanceDoc("team-a", "app", localModule)})
			platform := strings.Replace(platformYAML, "spec:", strings.Replace(tenantsSpec, tc.old, tc.replacement, 1), 1)
			fsys["platform.yaml"] = &fstest.MapFile{Data: []byte(platform + "---\n" + registryYAML)}
			set, err := Load(fsys, Options{CairnNamespace: "cairn-system"})

			var e *Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "got %v", err)
			g.Expect(e.Field).To(Equal(tc.field))
			g.Expect(e.Line).To(Equal(tc.line))
			g.Expect(e.Message).To(ContainSubstring(tc.message))
			g.Expect(set.Platform).To(BeNil(), "nothing of the revision is used")
			g.Expect(set.Instances).To(BeEmpty())
		})
	}
}

// TestTenantsThatDoNotMeetAreAccepted: patterns that look alike but share no file or
// namespace (a namespace must be a DNS label) are no overlap.
func TestTenantsThatDoNotMeetAreAccepted(t *testing.T) {
	g := NewWithT(t)
	spec := strings.Replace(tenantsSpec, "namespaces: [team-b, kube-b]", "namespaces: [team-b, team-a, 'team-a_*']", 1)
	spec = strings.Replace(spec, "namespaces: [team-a, team-a-*]", "namespaces: [team-a-*]", 1)
	spec = strings.Replace(spec, `"tenants/team-b/**"`, `"tenants/team-ab/**", "tenants/team-a.yaml"`, 1)
	_, err := Load(withPlatform("spec:", spec), Options{CairnNamespace: "cairn-system"})
	g.Expect(err).NotTo(HaveOccurred())
}

// TestFileClaimedByTwoTenantsIsRefused: a Platform with overlapping tenant paths is
// refused; should one be trusted nonetheless (synced before the check), each file
// two tenants claim is still refused on its own.
func TestFileClaimedByTwoTenantsIsRefused(t *testing.T) {
	g := NewWithT(t)
	spec := strings.Replace(tenantsSpec, `"tenants/team-b/**"`, `"tenants/*/app.yaml"`, 1)
	fsys := tenantRepo("", "", map[string]string{"tenants/team-a/app.yaml": instanceDoc("team-a", "app", localModule)})
	fsys["platform.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(platformYAML, "spec:", spec, 1) + "---\n" + registryYAML)}
	set, err := Load(fsys, Options{})

	g.Expect(err).To(MatchError(ContainSubstring("overlaps tenant team-a's")))
	g.Expect(set.Unparsed).To(Equal([]string{"tenants/team-a/app.yaml"}), "what it declares is unknown")
	errs := errorsIn(set, "tenants/team-a/app.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonTenantViolation))
	g.Expect(errs[0].Message).To(Equal(`file belongs to more than one tenant: team-a (paths ["tenants/team-a/**"]) and team-b (paths ["tenants/*/app.yaml"])`))
}

// TestPlatformUnderATenantPathIsRefused: a tenant cannot replace, shadow or duplicate
// the Platform, nor a Registry.
func TestPlatformUnderATenantPathIsRefused(t *testing.T) {
	g := NewWithT(t)
	smuggled := strings.Replace(platformYAML, `allow: ["team-*", "infra"]`, `allow: ["*"]`, 1)
	smuggled = strings.Replace(smuggled, "deny: [\"kube-*\"]", "deny: []", 1)
	registry := strings.Replace(registryYAML, "registry.example.com:5000", "evil.example.com", 1)
	set := mustLoad(t, tenantRepo("", "", map[string]string{
		"tenants/team-a/platform.yaml": "# smuggled\n" + smuggled,
		"tenants/team-a/registry.yaml": registry + "---\n" + instanceDoc("team-a", "app", localModule),
	}))

	g.Expect(set.Platform.Spec.Namespaces.Allow).To(Equal([]string{"team-*", "infra"}), "the real Platform is kept")
	g.Expect(set.Platform.Spec.Tenants).To(HaveLen(2))
	g.Expect(set.Origins["Platform//cluster"]).To(Equal(Origin{File: "platform.yaml", Line: 1}))
	g.Expect(set.Registry("internal").Spec.Hostname).To(Equal("registry.example.com:5000"), "the real Registry is kept")
	g.Expect(set.Instance("team-a", "app")).NotTo(BeNil(), "the tenant's own instance in the same file loads")

	errs := errorsIn(set, "tenants/team-a/platform.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonTenantViolation))
	g.Expect(errs[0].Error()).To(Equal(`tenants/team-a/platform.yaml:2: Platform cluster: tenant team-a: a Platform may not be declared under the tenant's paths ["tenants/team-a/**"]`))
	errs = errorsIn(set, "tenants/team-a/registry.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(Equal(`tenants/team-a/registry.yaml:1: Registry internal: tenant team-a: a Registry may not be declared under the tenant's paths ["tenants/team-a/**"]`))
}

func TestOnlyPlatformUnderItsOwnTenantPathIsFatal(t *testing.T) {
	g := NewWithT(t)
	platform := strings.Replace(platformYAML, "spec:", strings.Replace(tenantsSpec, `"tenants/team-a/**"`, `"*.yaml"`, 1), 1)
	_, err := Load(with(map[string]string{"platform.yaml": platform + "---\n" + registryYAML}), Options{})

	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue(), "got %v", err)
	g.Expect(e.Reason).To(Equal(ReasonTenantViolation))
	g.Expect(e.Error()).To(ContainSubstring(`platform.yaml:1: Platform cluster: tenant team-a: a Platform may not be declared under the tenant's paths ["*.yaml"]`))
}

// TestTrustedPlatformDecidesWhichPlatformIsSmuggled: a smuggled Platform whose tenant
// paths name the real Platform's file gets both refused (a repository without a
// Platform) unless the last synced Platform is trusted: then only the smuggled one is.
func TestTrustedPlatformDecidesWhichPlatformIsSmuggled(t *testing.T) {
	g := NewWithT(t)
	smuggled := strings.Replace(platformYAML, "spec:", strings.Replace(tenantsSpec, `"tenants/team-a/**"`, `"platform.yaml"`, 1), 1)
	repo := tenantRepo("", "", map[string]string{"tenants/team-a/platform.yaml": smuggled})
	_, err := Load(repo, Options{})
	g.Expect(err).To(MatchError(ContainSubstring("a Platform may not be declared under the tenant's paths")), "without an anchor")

	trusted := mustLoad(t, tenantRepo("", "", nil)).Platform.Spec
	set, err := Load(repo, Options{Trusted: &trusted})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Origins["Platform//cluster"].File).To(Equal("platform.yaml"))
	g.Expect(set.Platform.Spec.Tenants[0].Paths).To(Equal([]string{"tenants/team-a/**"}))
	errs := errorsIn(set, "tenants/team-a/platform.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonTenantViolation))
}

// TestKustomizePathsOfTenants: a tenant's kustomize path, relative to the repository
// root, must lie in the tenant's paths, which are relative to the directory the
// declarations are read from (Options.Root, the sync's --path).
func TestKustomizePathsOfTenants(t *testing.T) {
	cases := []struct {
		name, root, path string
		ok               bool
	}{
		{"inside, root of the repository", ".", "./tenants/team-a/app", true},
		{"the tenant's directory itself", ".", "tenants/team-a/", true},
		{"inside, under --path", "clusters/prod", "clusters/prod/tenants/team-a/app", true},
		{"relative to --path is not the repository's", "clusters/prod", "tenants/team-a/app", false},
		{"outside --path", "clusters/prod", "apps/prod", false},
		{"the repository root", "clusters/prod", ".", false},
		{"another tenant's", ".", "tenants/team-b/app", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			fsys := tenantRepo("", "", map[string]string{"tenants/team-a/app.yaml": instanceDoc("team-a", "app", "  module: {kustomize: {path: "+tc.path+"}}")})
			set, err := Load(fsys, Options{Root: tc.root})
			g.Expect(err).NotTo(HaveOccurred())
			errs := errorsIn(set, "tenants/team-a/app.yaml")
			if tc.ok {
				g.Expect(errs).To(BeEmpty())
				g.Expect(set.Instance("team-a", "app")).NotTo(BeNil())
				return
			}
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(ReasonTenantViolation))
			g.Expect(errs[0].Message).To(ContainSubstring("is outside the tenant's paths"))
		})
	}
}

func TestOwnerOf(t *testing.T) {
	spec := &cairnv1.PlatformSpec{Tenants: []cairnv1.Tenant{
		{Name: "team-a", Paths: []string{"tenants/a/**"}},
		{Name: "team-b", Paths: []string{"tenants/b/**", "shared/*.yaml"}},
		{Name: "team-c", Paths: []string{"shared/**"}},
	}}
	for file, want := range map[string]string{
		"tenants/a/app.yaml":      "team-a",
		"tenants/a/deep/app.yaml": "team-a",
		"tenants/b/app.yaml":      "team-b",
		"instances/app.yaml":      "",
		"shared/x.yaml":           "", // claimed by team-b and team-c: never read
		"shared/deep/x.yaml":      "team-c",
	} {
		got := ""
		if tenant := OwnerOf(spec, file); tenant != nil {
			got = tenant.Name
		}
		NewWithT(t).Expect(got).To(Equal(want), file)
	}
}

// TestCairnsNamespaceIsNoInstancesNamespace: under namespaces.allow ["*"], an instance
// of the platform team's own files in cairn's namespace is still refused.
func TestCairnsNamespaceIsNoInstancesNamespace(t *testing.T) {
	g := NewWithT(t)
	fsys := withPlatform(`allow: ["team-*", "infra"]`, `allow: ["*"]`)
	fsys["instances/spy.yaml"] = &fstest.MapFile{Data: []byte(instanceDoc("cairn-system", "spy", localModule))}
	fsys["instances/ok.yaml"] = &fstest.MapFile{Data: []byte(instanceDoc("cairn-systems", "ok", localModule))}
	set, err := Load(fsys, Options{CairnNamespace: "cairn-system"})

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Instance("cairn-system", "spy")).To(BeNil())
	g.Expect(set.Instance("cairn-systems", "ok")).NotTo(BeNil())
	errs := errorsIn(set, "instances/spy.yaml")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Reason).To(Equal(ReasonNamespaceDenied))
	g.Expect(errs[0].Error()).To(Equal(`instances/spy.yaml:5: ModuleInstance cairn-system/spy: metadata.namespace: namespace "cairn-system" is cairn's own namespace: no instance may live there, whatever the Platform's namespaces.allow says`))
}

// TestPlatformFilesWinOverATenantsDuplicate: a tenant that declares, in its own
// namespace, the instance a platform file declares has its declaration refused
// (naming the platform's file); the platform's instance stays valid, whichever file is
// read first.
func TestPlatformFilesWinOverATenantsDuplicate(t *testing.T) {
	for _, platformFile := range []string{"instances/base.yaml", "zz/base.yaml"} {
		t.Run(platformFile, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, tenantRepo("", "", map[string]string{
				platformFile:              instanceDoc("team-a", "base", localModule),
				"tenants/team-a/dup.yaml": instanceDoc("team-a", "base", localModule, "  values: {grabbed: true}"),
			}))

			g.Expect(set.Instance("team-a", "base")).NotTo(BeNil(), "the platform's instance is no duplicate")
			g.Expect(set.Instance("team-a", "base").Spec.Values).To(BeNil())
			g.Expect(set.Tenant("team-a", "base")).To(BeNil(), "it is the platform team's")
			g.Expect(set.Origins["ModuleInstance/team-a/base"].File).To(Equal(platformFile))
			g.Expect(errorsIn(set, platformFile)).To(BeEmpty())
			errs := errorsIn(set, "tenants/team-a/dup.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(ReasonDuplicateDeclaration))
			g.Expect(errs[0].Object).To(BeEmpty(), "the platform's instance is not failed by it")
			g.Expect(errs[0].Error()).To(Equal("tenants/team-a/dup.yaml:4: metadata.name: tenant team-a: ModuleInstance team-a/base is declared by the platform team at " +
				platformFile + ":1, whose files win (this declaration is refused)"))
		})
	}
}

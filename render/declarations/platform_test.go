package declarations

import (
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestInvalidPlatform covers every Platform rule: each is fatal, since every instance
// depends on the Platform.
func TestInvalidPlatform(t *testing.T) {
	cases := []struct {
		name, old, replacement string
		reason, field, message string
		line                   int
	}{
		{name: "name other than cluster", old: "name: cluster", replacement: "name: prod",
			reason: ReasonInvalidDeclaration, line: 4, field: "metadata.name", message: `must be "cluster"`},
		{name: "namespace", old: "name: cluster", replacement: "name: cluster\n  namespace: cairn",
			reason: ReasonInvalidDeclaration, line: 5, field: "metadata.namespace", message: "cluster-scoped"},
		{name: "unknown field", old: "skewPolicy: Warn", replacement: "skewPolicy: Warn\n  skewPolice: Warn",
			reason: ReasonInvalidDeclaration, line: 10, field: "spec.skewPolice", message: "unknown field"},
		{name: "status", old: "spec:", replacement: "status: {lastSyncedRevision: abc}\nspec:",
			reason: ReasonInvalidDeclaration, line: 5, field: "status", message: "not allowed"},
		{name: "catalog module without major", old: "module: example.com/catalog@v0", replacement: "module: example.com/catalog",
			reason: ReasonInvalidDeclaration, line: 7, field: "spec.catalogs[0].module", message: "major version"},
		{name: "catalog version not semver", old: "version: v0.3.1", replacement: "version: '0.3'",
			reason: ReasonInvalidDeclaration, line: 8, field: "spec.catalogs[0].version", message: "not an exact version"},
		{name: "skewPolicy enum", old: "skewPolicy: Warn", replacement: "skewPolicy: Ignore",
			reason: ReasonInvalidDeclaration, line: 9, field: "spec.skewPolicy", message: `unsupported value "Ignore", want one of Warn, Refuse`},
		{name: "moduleRegistry not declared", old: "moduleRegistry: internal", replacement: "moduleRegistry: external",
			reason: ReasonDanglingReference, line: 10, field: "spec.moduleRegistry", message: `Registry "external" is not declared`},
		{name: "namespace pattern", old: `deny: ["kube-*"]`, replacement: `deny: ["kube-*", "kube-["]`,
			reason: ReasonInvalidDeclaration, line: 13, field: "spec.namespaces.deny[1]", message: "not a valid pattern"},
		{name: "verify mode enum", old: "mode: Enforce", replacement: "mode: Strict",
			reason: ReasonInvalidDeclaration, line: 15, field: "spec.verify.mode", message: `unsupported value "Strict"`},
		{name: "maxPercent over 100", old: "maxPercent: 50", replacement: "maxPercent: 101",
			reason: ReasonInvalidDeclaration, line: 18, field: "spec.prune.maxPercent", message: "between 0 and 100"},
		{name: "maxDeletions negative", old: "maxDeletions: 500", replacement: "maxDeletions: -1",
			reason: ReasonInvalidDeclaration, line: 17, field: "spec.prune.maxDeletions", message: "at least 0"},
		{name: "render mode enum", old: "mode: InProcess", replacement: "mode: Remote",
			reason: ReasonInvalidDeclaration, line: 21, field: "spec.render.mode", message: `unsupported value "Remote"`},
		{name: "render mode Job needs publish", old: "    mode: InProcess\n    publish: {registry: internal, repository: rendered/cluster}", replacement: "    mode: Job",
			reason: ReasonInvalidDeclaration, line: 21, field: "spec.render.mode", message: "render mode Job needs spec.render.publish"},
		{name: "publish registry not declared", old: "{registry: internal,", replacement: "{registry: other,",
			reason: ReasonDanglingReference, line: 22, field: "spec.render.publish.registry", message: `Registry "other" is not declared`},
		{name: "publish keep below 1", old: "repository: rendered/cluster}", replacement: "repository: rendered/cluster, keep: 0}",
			reason: ReasonInvalidDeclaration, line: 22, field: "spec.render.publish.keep", message: "must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set, err := Load(withPlatform(tc.old, tc.replacement), Options{})

			var e *Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "got %v", err)
			g.Expect(e.Reason).To(Equal(tc.reason))
			g.Expect(e.File).To(Equal("platform.yaml"))
			g.Expect(e.Line).To(Equal(tc.line))
			g.Expect(e.Field).To(Equal(tc.field))
			g.Expect(e.Message).To(ContainSubstring(tc.message))
			g.Expect(e.Error()).To(HavePrefix("platform.yaml:%d: Platform ", tc.line))
			g.Expect(set.Platform).To(BeNil())
			g.Expect(set.Instances).To(BeEmpty(), "nothing is applied without a valid Platform")
		})
	}
}

func TestPlatformErrorsAreAllReported(t *testing.T) {
	g := NewWithT(t)
	fsys := withPlatform("skewPolicy: Warn", "skewPolicy: Never\n  bogus: 1")
	_, err := Load(fsys, Options{})

	g.Expect(err.Error()).To(ContainSubstring("spec.skewPolicy"))
	g.Expect(err.Error()).To(ContainSubstring("spec.bogus: unknown field"))
}

func TestPlatformReferencesInvalidRegistry(t *testing.T) {
	g := NewWithT(t)
	broken := strings.Replace(registryYAML, "hostname: registry.example.com:5000", "hostname: https://registry.example.com", 1)
	set, err := Load(with(map[string]string{"platform.yaml": platformYAML + "---\n" + broken}), Options{})

	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue())
	g.Expect(e.Reason).To(Equal(ReasonDanglingReference))
	g.Expect(e.Line).To(Equal(10))
	g.Expect(e.Message).To(ContainSubstring(`Registry "internal" is declared but invalid`))
	g.Expect(set.Invalid).To(HaveLen(1), "the Registry's own problem is reported too")
	g.Expect(set.Invalid[0].Field).To(Equal("spec.hostname"))
	g.Expect(set.Invalid[0].Line).To(Equal(29))
}

func TestDuplicatePlatform(t *testing.T) {
	g := NewWithT(t)
	set, err := Load(with(map[string]string{"a/platform.yaml": platformYAML}), Options{})

	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue())
	g.Expect(e.Reason).To(Equal(ReasonDuplicatePlatform))
	g.Expect(e.File).To(Equal("platform.yaml"))
	g.Expect(e.Line).To(Equal(1))
	g.Expect(e.Message).To(ContainSubstring("declared at a/platform.yaml:1 and at platform.yaml:1"))
	g.Expect(set.Platform).To(BeNil())
}

func TestMissingPlatform(t *testing.T) {
	g := NewWithT(t)
	set, err := Load(with(map[string]string{"platform.yaml": registryYAML}), Options{})

	var e *Error
	g.Expect(errors.As(err, &e)).To(BeTrue())
	g.Expect(e.Reason).To(Equal(ReasonMissingPlatform))
	g.Expect(e.Error()).To(Equal(".: no Platform is declared"))
	g.Expect(set.Registries).To(HaveLen(1), "what was read is still returned for reporting")
	g.Expect(set.Platform).To(BeNil())
}

func TestCUEModuleNeedsModuleRegistry(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, withPlatform("  moduleRegistry: internal\n", ""))

	g.Expect(set.Instance("team-a", "podinfo")).To(BeNil())
	g.Expect(set.Invalid).To(HaveLen(1))
	e := set.Invalid[0]
	g.Expect(e.Reason).To(Equal(ReasonDanglingReference))
	g.Expect(e.File).To(Equal("instances/team-a/apps.yaml"))
	g.Expect(e.Line).To(Equal(9))
	g.Expect(e.Field).To(Equal("spec.module.cue"))
	g.Expect(e.Message).To(ContainSubstring("spec.moduleRegistry, which is not set"))
}

func TestInvalidRegistry(t *testing.T) {
	cases := []struct {
		name, spec, field, message string
		line                       int
	}{
		{name: "no hostname", spec: "  plainHTTP: true", line: 5, field: "spec.hostname", message: "required"},
		{name: "hostname with scheme", spec: "  hostname: https://mirror.example.com", line: 6, field: "spec.hostname", message: "host[:port]"},
		{name: "public key without secret name", spec: "  hostname: m.example.com\n  verify:\n    cosign:\n      publicKeys:\n        - secretRef: {key: cosign.pub}",
			line: 10, field: "spec.verify.cosign.publicKeys[0].secretRef.name", message: "required"},
		{name: "no public keys", spec: "  hostname: m.example.com\n  verify: {cosign: {publicKeys: []}}",
			line: 7, field: "spec.verify.cosign.publicKeys", message: "at least one key"},
		{name: "secretRef without name", spec: "  hostname: m.example.com\n  secretRef: {}", line: 7, field: "spec.secretRef.name", message: "required"},
		{name: "signing key without name", spec: "  hostname: m.example.com\n  signing: {keySecretRef: {name: ''}}", line: 7, field: "spec.signing.keySecretRef.name", message: "required"},
		{name: "timeout", spec: "  hostname: m.example.com\n  timeout: -1s", line: 7, field: "spec.timeout", message: "greater than zero"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			doc := "apiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata:\n  name: mirror\nspec:\n" + tc.spec + "\n"
			set := mustLoad(t, with(map[string]string{"mirror.yaml": doc}))

			g.Expect(set.Registry("mirror")).To(BeNil())
			g.Expect(set.Registries).To(HaveLen(1))
			errs := errorsIn(set, "mirror.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(ReasonInvalidDeclaration))
			g.Expect(errs[0].Line).To(Equal(tc.line))
			g.Expect(errs[0].Field).To(Equal(tc.field))
			g.Expect(errs[0].Object).To(Equal("mirror"))
			g.Expect(errs[0].Message).To(ContainSubstring(tc.message))
		})
	}
}

// TestPublishKeep: render.publish.keep is read as written, and unset keeps 10.
func TestPublishKeep(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, withPlatform("repository: rendered/cluster}", "repository: rendered/cluster, keep: 3}"))
	g.Expect(set.Platform.Spec.Render.Publish.KeepOrDefault()).To(Equal(3))
	set = mustLoad(t, withPlatform("", ""))
	g.Expect(set.Platform.Spec.Render.Publish.KeepOrDefault()).To(Equal(10))
}

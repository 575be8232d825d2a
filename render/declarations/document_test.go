package declarations

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

// TestUnidentifiableDocument covers documents of ours whose identity cannot be read: the
// file is listed in Unparsed, because the instances it declares are unknown.
func TestUnidentifiableDocument(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		line    int
		field   string
		message string
	}{
		{name: "unknown kind", doc: "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstanse\nmetadata: {name: x, namespace: team-a}\n",
			line: 2, field: "kind", message: `unknown kind "ModuleInstanse"`},
		{name: "no kind", doc: "apiVersion: cairn.dev/v1alpha1\nmetadata: {name: x, namespace: team-a}\n",
			line: 1, field: "kind", message: "required"},
		{name: "no name", doc: "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  namespace: team-a\n",
			line: 3, field: "metadata.name", message: "required"},
		{name: "no namespace", doc: "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n",
			line: 3, field: "metadata.namespace", message: "required"},
		{name: "other version of our group", doc: "# comment\napiVersion: cairn.dev/v1beta1\nkind: ModuleInstance\n",
			line: 2, field: "apiVersion", message: `unsupported version "cairn.dev/v1beta1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, with(map[string]string{"instances/x.yaml": "kind: ConfigMap\napiVersion: v1\n---\n" + tc.doc}))

			g.Expect(set.Unparsed).To(Equal([]string{"instances/x.yaml"}))
			errs := errorsIn(set, "instances/x.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(ReasonInvalidDeclaration))
			g.Expect(errs[0].Line).To(Equal(tc.line + 3))
			g.Expect(errs[0].Field).To(Equal(tc.field))
			g.Expect(errs[0].Message).To(ContainSubstring(tc.message))
			g.Expect(set.Instances).To(HaveLen(3))
		})
	}
}

// TestInvalidMetadata covers metadata rules: the document is invalid but identified.
func TestInvalidMetadata(t *testing.T) {
	long := strings.Repeat("n", 40)
	cases := []struct {
		name, doc, kind, field, message string
		line                            int
	}{
		{name: "metadata field other than name, namespace, labels, annotations", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n  namespace: team-a\n  uid: 123\nspec: {module: {local: {path: x}}}\n",
			line: 6, field: "metadata.uid", message: "unknown field"},
		{name: "name not DNS-1123", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: Pod_Info\n  namespace: team-a\nspec: {module: {local: {path: x}}}\n",
			line: 4, field: "metadata.name", message: "RFC 1123"},
		{name: "namespace not DNS-1123 label", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n  namespace: team-a.b\nspec: {module: {local: {path: x}}}\n",
			line: 5, field: "metadata.namespace", message: "must not contain dots"},
		{name: "instance label too long", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: " + long + "\n  namespace: team-" + long + "\nspec: {module: {local: {path: x}}}\n",
			line: 4, field: "metadata.name", message: "cairn.dev/instance label"},
		{name: "bad label value", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n  namespace: team-a\n  labels:\n    app.kubernetes.io/name: 'a b'\nspec: {module: {local: {path: x}}}\n",
			line: 7, field: "metadata.labels.app.kubernetes.io/name", message: "invalid"},
		{name: "a hold declared in Git", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n  namespace: team-a\n  annotations:\n    cairn.dev/hold: '{\"by\":\"admin\"}'\nspec: {module: {local: {path: x}}}\n",
			line: 7, field: "metadata.annotations.cairn.dev/hold", message: "not allowed in Git"},
		{name: "a tenant named in Git", kind: "ModuleInstance",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: x\n  namespace: team-a\n  annotations:\n    cairn.dev/tenant: team-b\nspec: {module: {local: {path: x}}}\n",
			line: 7, field: "metadata.annotations.cairn.dev/tenant", message: "cairn writes it"},
		{name: "registry with namespace", kind: "Registry",
			doc:  "apiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata:\n  name: mirror\n  namespace: cairn\nspec: {hostname: mirror.example.com}\n",
			line: 5, field: "metadata.namespace", message: "cluster-scoped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set := mustLoad(t, with(map[string]string{"x.yaml": tc.doc}))

			g.Expect(set.Unparsed).To(BeEmpty())
			errs := errorsIn(set, "x.yaml")
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Reason).To(Equal(ReasonInvalidDeclaration))
			g.Expect(errs[0].Kind).To(Equal(tc.kind))
			g.Expect(errs[0].Line).To(Equal(tc.line))
			g.Expect(errs[0].Field).To(Equal(tc.field))
			g.Expect(errs[0].Message).To(ContainSubstring(tc.message))
		})
	}
}

func TestInvalidYAML(t *testing.T) {
	g := NewWithT(t)
	broken := podinfoYAML + "---\n" + frontendYAML + "  values: {a: [1, 2}\n"
	set := mustLoad(t, with(map[string]string{"instances/team-a/apps.yaml": broken}))

	g.Expect(set.Unparsed).To(Equal([]string{"instances/team-a/apps.yaml"}))
	g.Expect(set.Invalid).To(HaveLen(1))
	e := set.Invalid[0]
	g.Expect(e.Reason).To(Equal(ReasonInvalidYAML))
	g.Expect(e.File).To(Equal("instances/team-a/apps.yaml"))
	g.Expect(e.Line).To(Equal(31))
	g.Expect(e.Error()).To(HavePrefix("instances/team-a/apps.yaml:31: invalid YAML: "))
	g.Expect(set.Instance("team-a", "podinfo")).To(BeNil(), "nothing of a file that does not parse is used")
	g.Expect(names(set)).To(Equal([]string{"infra/cert-manager"}))
}

func TestIgnoredDocuments(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, with(map[string]string{
		"empty.yaml":      "\n",
		"comments.yml":    "# nothing here\n---\n---\n",
		"list.yaml":       "- apiVersion: cairn.dev/v1alpha1\n  kind: Bogus\n",
		"scalar.yaml":     "just a string\n",
		"kustomize.yaml":  "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n",
		"notes.txt":       "apiVersion: cairn.dev/v1alpha1\nkind: Bogus\n",
		"sub/.git/x.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: Bogus\n",
		// A Helm chart kept in the repository: templates are not declarations.
		"charts/hello/Chart.yaml":        "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
		"charts/hello/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"charts/hello/templates/mi.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: Bogus\n",
	}))

	g.Expect(set.Invalid).To(BeEmpty())
	g.Expect(set.Unparsed).To(BeEmpty())
	g.Expect(set.Instances).To(HaveLen(3))
}

func TestSymlinkIsNotFollowed(t *testing.T) {
	g := NewWithT(t)
	fsys := realistic()
	fsys["instances/link.yaml"] = &fstest.MapFile{Data: []byte("/etc/passwd"), Mode: fs.ModeSymlink}
	set := mustLoad(t, fsys)

	g.Expect(set.Unparsed).To(Equal([]string{"instances/link.yaml"}))
	g.Expect(set.Invalid[0].Message).To(ContainSubstring("not a regular file"))
}

func TestFileTooLarge(t *testing.T) {
	g := NewWithT(t)
	big := instanceDoc("team-a", "big", "  module: {local: {path: x}}", "  values: {blob: '"+strings.Repeat("x", 1<<20)+"'}")
	set := mustLoad(t, with(map[string]string{"instances/big.yaml": big}))

	g.Expect(set.Unparsed).To(Equal([]string{"instances/big.yaml"}))
	g.Expect(set.Invalid).To(HaveLen(1))
	g.Expect(set.Invalid[0].Reason).To(Equal(ReasonTooLarge))
	g.Expect(set.Invalid[0].Error()).To(Equal("instances/big.yaml: file is larger than 1048576 bytes, the cap of the Platform's spec.limits.maxFileBytes"))

	set, err := Load(realistic(), Options{MaxFileBytes: 200})
	g.Expect(err).To(HaveOccurred(), "the Platform file is over the cap, so there is no Platform")
	g.Expect(err.(*Error).Reason).To(Equal(ReasonMissingPlatform))
	g.Expect(err.Error()).To(ContainSubstring("platform.yaml"))
	g.Expect(set.Unparsed).To(ContainElements("platform.yaml", "instances/team-a/apps.yaml"))
}

func TestTooManyDocumentsFailOnlyTheirFile(t *testing.T) {
	g := NewWithT(t)
	// instances/team-a/apps.yaml holds 3 documents (one of them empty), platform.yaml 2.
	set := mustLoad(t, withPlatform("spec:", "spec:\n  limits: {maxFileDocuments: 3}"))
	g.Expect(set.Unparsed).To(BeEmpty())

	set = mustLoad(t, withPlatform("spec:", "spec:\n  limits: {maxFileDocuments: 2}"))
	g.Expect(set.Unparsed).To(Equal([]string{"instances/team-a/apps.yaml"}))
	e := errorsIn(set, "instances/team-a/apps.yaml")
	g.Expect(e).To(HaveLen(1))
	g.Expect(e[0].Reason).To(Equal(ReasonTooManyDocuments))
	g.Expect(e[0].Line).To(Equal(33), "the first document over the cap (the empty one)")
	g.Expect(e[0].Message).To(Equal("file holds more than 2 documents, the cap of the Platform's spec.limits.maxFileDocuments"))
	g.Expect(names(set)).To(Equal([]string{"infra/cert-manager"}), "the other files' instances are loaded")
	g.Expect(set.Origins).NotTo(HaveKey("ModuleInstance/team-a/podinfo"), "what the file declares is unknown")

	_, err := Load(withPlatform("spec:", "spec:\n  limits: {maxFileDocuments: 1}"), Options{})
	g.Expect(err).To(MatchError(ContainSubstring("no Platform is declared (files that could not be read: instances/team-a/apps.yaml, platform.yaml)")),
		"the Platform's own file is under its caps too")
}

func TestDuplicateInstance(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, with(map[string]string{"instances/zz-copy.yaml": "# copy\n" + podinfoYAML}))

	g.Expect(set.Instance("team-a", "podinfo")).To(BeNil(), "neither copy is applied")
	g.Expect(set.Instance("team-a", "frontend")).NotTo(BeNil(), "its dependent waits, it is not invalid")
	g.Expect(set.Origins["ModuleInstance/team-a/podinfo"]).To(Equal(Origin{File: "instances/team-a/apps.yaml", Line: 1}))
	g.Expect(set.Invalid).To(HaveLen(2))
	for i, file := range []string{"instances/team-a/apps.yaml", "instances/zz-copy.yaml"} {
		e := set.Invalid[i]
		g.Expect(e.Reason).To(Equal(ReasonDuplicateDeclaration))
		g.Expect(e.File).To(Equal(file))
		g.Expect(e.Object).To(Equal("team-a/podinfo"))
		g.Expect(e.Message).To(ContainSubstring("instances/team-a/apps.yaml:1"))
		g.Expect(e.Message).To(ContainSubstring("instances/zz-copy.yaml:2"))
	}
}

func TestDuplicateRegistryKeepsTheFirst(t *testing.T) {
	g := NewWithT(t)
	set := mustLoad(t, with(map[string]string{"registries.yaml": strings.Replace(registryYAML, "registry.example.com:5000", "other.example.com", 1)}))

	g.Expect(set.Registry("internal").Spec.Hostname).To(Equal("registry.example.com:5000"))
	g.Expect(set.Invalid).To(HaveLen(1))
	g.Expect(set.Invalid[0].Reason).To(Equal(ReasonDuplicateDeclaration))
	g.Expect(set.Invalid[0].File).To(Equal("registries.yaml"))
	g.Expect(set.Invalid[0].Message).To(ContainSubstring("declared more than once: at registries.yaml:1 and at platform.yaml:24"))
}

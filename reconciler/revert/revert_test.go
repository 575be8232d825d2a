package revert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/gitsource/forge"
)

const platform = `apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  namespaces:
    allow: ["team-*"]
`

func instance(name, module, replicas string) string {
	return `# ` + name + `
apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: ` + name + `
  namespace: team-a
spec:
  module:
    local: {path: ` + module + `}
  values: {replicas: ` + replicas + `}
`
}

func tree(t *testing.T, files map[string]string) *gitsource.Tree {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := gitsource.ReadDir(dir, gitsource.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func byPath(files []forge.FileChange) map[string]forge.FileChange {
	out := map[string]forge.FileChange{}
	for _, f := range files {
		out[f.Path] = f
	}
	return out
}

// TestInstance: the document of the instance is put back in place in a file that
// declares others (which keep their head content), its own module's files come
// back (a file added since is deleted), and a module another instance uses is
// named, not reverted.
func TestInstance(t *testing.T) {
	g := NewWithT(t)
	held := tree(t, map[string]string{
		"platform/platform.yaml":           platform,
		"platform/apps.yaml":               instance("web", "modules/web", "3") + "---\n" + instance("api", "modules/shared", "1"),
		"platform/db.yaml":                 instance("db", "modules/shared", "1"),
		"platform/modules/web/main.cue":    "web: 1\n",
		"platform/modules/shared/main.cue": "shared: 1\n",
		"README.md":                        "hi\n",
	})
	headApps := instance("web", "modules/web", "5") + "---\n" + instance("api", "modules/shared", "2")
	head := tree(t, map[string]string{
		"platform/platform.yaml":           platform,
		"platform/apps.yaml":               headApps,
		"platform/db.yaml":                 instance("db", "modules/shared", "1"),
		"platform/modules/web/main.cue":    "web: 2\n",
		"platform/modules/web/extra.cue":   "extra: 1\n",
		"platform/modules/shared/main.cue": "shared: 2\n",
		"README.md":                        "hi\n",
	})
	r, err := Instance(held, head, Options{Path: "platform"}, "team-a", "web")
	g.Expect(err).NotTo(HaveOccurred())
	files := byPath(r.Files)
	g.Expect(files).To(HaveLen(3))
	g.Expect(string(files["platform/apps.yaml"].Content)).To(Equal(
		instance("web", "modules/web", "3")+"---\n"+instance("api", "modules/shared", "2")), "api keeps its head declaration")
	g.Expect(string(files["platform/apps.yaml"].Before)).To(Equal(headApps))
	g.Expect(files["platform/modules/web/main.cue"]).To(Equal(forge.FileChange{Path: "platform/modules/web/main.cue",
		Content: []byte("web: 1\n"), Existed: true, Before: []byte("web: 2\n")}))
	g.Expect(files["platform/modules/web/extra.cue"].Delete).To(BeTrue())
	g.Expect(r.Notes).To(BeEmpty())

	r, err = Instance(held, head, Options{Path: "platform"}, "team-a", "api")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byPath(r.Files)).To(HaveLen(1))
	g.Expect(r.Notes).To(ConsistOf(ContainSubstring("its module platform/modules/shared changed since, but team-a/db use it too")))

	_, err = Instance(held, head, Options{Path: "platform"}, "team-a", "db")
	g.Expect(err).To(MatchError(ContainSubstring("nothing to revert")))
	_, err = Instance(held, head, Options{Path: "platform"}, "team-a", "nope")
	g.Expect(err).To(MatchError(ContainSubstring("declares no valid ModuleInstance team-a/nope")))
}

// TestInstanceRemovedSince: an instance the head no longer declares is added back
// to the file it was declared in.
func TestInstanceRemovedSince(t *testing.T) {
	g := NewWithT(t)
	held := tree(t, map[string]string{"platform.yaml": platform + "---\n" + instance("web", "modules/web", "3"),
		"modules/web/main.cue": "web: 1\n"})
	head := tree(t, map[string]string{"platform.yaml": platform, "modules/web/main.cue": "web: 1\n"})
	r, err := Instance(held, head, Options{}, "team-a", "web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Files).To(HaveLen(1))
	g.Expect(string(r.Files[0].Content)).To(Equal(platform + "---\n" + instance("web", "modules/web", "3")))
}

func TestDocumentAt(t *testing.T) {
	g := NewWithT(t)
	content := []byte("a: 1\n---\n# c\nb: 2\n--- # x\nc: 3\n")
	at := documentAt(content, 4)
	g.Expect(at[2]).To(BeZero())
	g.Expect(string(content[at[0]:at[1]])).To(Equal("# c\nb: 2\n"))
	at = documentAt(content, 1)
	g.Expect(string(content[at[0]:at[1]])).To(Equal("a: 1\n"))
	at = documentAt(content, 6)
	g.Expect(string(content[at[0]:at[1]])).To(Equal("c: 3\n"))
}

// TestTheLastDocumentWithoutANewline: the held document, last in its file with no
// final newline, put back before another document keeps the separator on its own
// line.
func TestTheLastDocumentWithoutANewline(t *testing.T) {
	g := NewWithT(t)
	doc := strings.TrimSuffix(instance("web", "modules/web", "3"), "\n")
	held := tree(t, map[string]string{"platform.yaml": platform, "apps.yaml": instance("api", "modules/api", "1") + "---\n" + doc,
		"modules/web/main.cue": "web: 1\n", "modules/api/main.cue": "api: 1\n"})
	head := tree(t, map[string]string{"platform.yaml": platform,
		"apps.yaml":            instance("web", "modules/web", "5") + "---\n" + instance("api", "modules/api", "1"),
		"modules/web/main.cue": "web: 1\n", "modules/api/main.cue": "api: 1\n"})
	r, err := Instance(held, head, Options{}, "team-a", "web")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(r.Files[0].Content)).To(Equal(doc + "\n---\n" + instance("api", "modules/api", "1")))

	inline := tree(t, map[string]string{"platform.yaml": platform + "--- {apiVersion: cairn.dev/v1alpha1, kind: ModuleInstance, " +
		"metadata: {name: web, namespace: team-a}, spec: {module: {local: {path: modules/web}}}}\n", "modules/web/main.cue": "web: 1\n"})
	_, err = Instance(inline, head, Options{}, "team-a", "web")
	g.Expect(err).To(MatchError(ContainSubstring("starts on its --- line")))
}

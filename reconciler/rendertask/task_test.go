package rendertask

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// TestMain lets the test binary serve as the render worker of its Renderers.
func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	os.Exit(m.Run())
}

// A module that renders a ConfigMap and a Secret with data, from a file reached
// through a link of the repository.
const module = `package app

instance: {name: string, namespace: string}
values: {greeting: string | *"hello"}
objects: {
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name, data: greeting: values.greeting}
	secret: {apiVersion: "v1", kind: "Secret", metadata: {name: instance.name, annotations: {}}, stringData: password: shared.password}
}
`

const shared = `package app

shared: password: "Task-Secret-Pa55-K9v"
`

// repo writes a repository with the module under modules/web, its shared file
// linked from modules/common, and another module that must not travel.
func repo(t *testing.T) string {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"modules/web/main.cue":      module,
		"modules/common/shared.cue": shared,
		"modules/other/main.cue":    "package app\nobjects: {}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../common/shared.cue", filepath.Join(dir, "modules/web/shared.cue")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newRegistry(t *testing.T) *sign.Client {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	c, err := sign.NewClient(sign.Endpoint{Host: strings.TrimPrefix(srv.URL, "http://"), PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestATaskRendersAsInProcess: the source packed from the repository, rendered by
// Run and fetched back is the render of the same request in-process, to the
// digest; the registry never holds the Secret's data in the clear; a result is
// taken only with its task's key and only when it names its task's input.
func TestATaskRendersAsInProcess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := repo(t)
	src := os.DirFS(root)
	renderer := render.NewRenderer()
	t.Cleanup(func() { _ = renderer.Close() })
	req := render.Request{Name: "web", Namespace: "team-a", Source: src, LocalPath: "modules/web", Values: []byte(`{"greeting":"hi"}`)}
	want, err := renderer.Render(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())

	tarball, err := PackSource(src, []string{"modules/web", "modules/common"})
	g.Expect(err).NotTo(HaveOccurred())
	again, err := PackSource(src, []string{"modules/common", "./modules/web"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(tarball), "the same files give the same bytes")
	g.Expect(tarNames(t, tarball)).To(Equal([]string{"modules/common/shared.cue", "modules/web/main.cue", "modules/web/shared.cue"}),
		"only the directories named travel")

	c := newRegistry(t)
	sourceDigest, err := PushSource(ctx, c, "platform/team-a/web/source", tarball)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	q := RequestOf(req, nil)
	spec := &Spec{Namespace: "team-a", Name: "web", InputDigest: "sha256:input", Revision: "abc123",
		Source: "platform/team-a/web/source", SourceDigest: sourceDigest.String(), Result: "platform/team-a/web/render",
		Request: q, PublicKey: EncodeKey(key.Public)}
	b, err := json.Marshal(spec) // as the config Secret carries it
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).NotTo(ContainSubstring("Pa55"), "the Spec carries no Secret of the render")
	var read Spec
	g.Expect(json.Unmarshal(b, &read)).To(Succeed())

	dgst, err := Run(ctx, &read, Env{Registry: c, Renderer: renderer, TempDir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())

	files, ann, err := c.PullArtifact(ctx, spec.Result, dgst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ann).To(HaveKeyWithValue(AnnotationInput, "sha256:input"))
	for _, f := range files {
		g.Expect(string(f.Data)).NotTo(ContainSubstring("Task-Secret-Pa55-K9v"), "sealed in the registry")
	}

	got, err := Fetch(ctx, c, spec, dgst, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Digest).To(Equal(want.Digest), "the same render, to the digest")
	g.Expect(got.Objects).To(Equal(want.Objects))
	g.Expect(got.ModuleDigest).To(Equal(want.ModuleDigest))

	other, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = Fetch(ctx, c, spec, dgst, other)
	g.Expect(err).To(MatchError(ContainSubstring("does not open with this task's key")))
	stale := *spec
	stale.InputDigest = "sha256:other"
	_, err = Fetch(ctx, c, &stale, dgst, key)
	g.Expect(err).To(MatchError(ContainSubstring("is not of this task")))
}

// TestATaskReturnsTheRenderError: a render that fails fails the task with the
// render's own error, file and line, and pushes nothing.
func TestATaskReturnsTheRenderError(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "m"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "m/main.cue"), []byte("package app\n\nobjects: x: 1 & 2\n"), 0o644)).To(Succeed())
	tarball, err := PackSource(os.DirFS(dir), []string{"m"})
	g.Expect(err).NotTo(HaveOccurred())
	c := newRegistry(t)
	sourceDigest, err := PushSource(ctx, c, "p/source", tarball)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	renderer := render.NewRenderer()
	t.Cleanup(func() { _ = renderer.Close() })
	spec := &Spec{Namespace: "team-a", Name: "web", InputDigest: "sha256:input", Source: "p/source", SourceDigest: sourceDigest.String(),
		Result: "p/render", Request: Request{LocalPath: "m"}, PublicKey: EncodeKey(key.Public)}
	_, err = Run(ctx, spec, Env{Registry: c, Renderer: renderer, TempDir: t.TempDir()})
	g.Expect(err).To(MatchError(ContainSubstring("main.cue:3")))
	_, err = c.Resolve(ctx, "p/render", Tag("sha256:input"))
	g.Expect(err).To(HaveOccurred(), "nothing pushed")
}

// TestUnpackSourceRefuses: a path that is not clean, an entry under a link, a
// device and files over the cap are refused; nothing is written through a link.
func TestUnpackSourceRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tar.Header
		err     string
	}{
		{"a path climbing out", []tar.Header{{Name: "../x", Typeflag: tar.TypeReg}}, "not a clean relative path"},
		{"an absolute path", []tar.Header{{Name: "/etc/x", Typeflag: tar.TypeReg}}, "not a clean relative path"},
		{"a file through a link", []tar.Header{{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "a/x", Typeflag: tar.TypeReg}},
			"under the symbolic link a"},
		{"a device", []tar.Header{{Name: "d", Typeflag: tar.TypeChar}}, "neither a file nor a symbolic link"},
		{"too large", nil, "exceed the cap"}, // bigTar
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, h := range tc.entries {
				h.Mode = 0o644
				g.Expect(tw.WriteHeader(&h)).To(Succeed())
			}
			_ = tw.Close()
			data := buf.Bytes()
			if tc.name == "too large" {
				data = bigTar(t)
			}
			_, err := UnpackSource(data, t.TempDir())
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
}

// bigTar is a tar of one file one byte over MaxSourceBytes.
func bigTar(t *testing.T) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: MaxSourceBytes + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, MaxSourceBytes+1)); err != nil {
		t.Fatal(err)
	}
	_ = tw.Close()
	return buf.Bytes()
}

func tarNames(t *testing.T, data []byte) []string {
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}

// TestFetchTakesNothingOnTrust: a result that names the task's input is still
// refused when its digest is not its objects', a Secret's data is in the clear (it
// would open with any key), it holds hooks, or an object is empty; its warnings
// are bounded.
func TestFetchTakesNothingOnTrust(t *testing.T) {
	ctx := context.Background()
	c := newRegistry(t)
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Namespace: "team-a", Name: "web", InputDigest: "hmac-sha256:in", Revision: "abc", Result: "p/render"}
	secret := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s", "namespace": "team-a"}, "stringData": map[string]any{"k": "v"}}}
	}
	good := func() *render.Result {
		res := &render.Result{Objects: []*unstructured.Unstructured{secret()}}
		res.Digest, _ = render.ResultDigest(res.Objects, nil)
		return res
	}
	push := func(g *WithT, res *render.Result, sealed bool) digest.Digest {
		if sealed {
			g.Expect(Seal(res, key.Public)).To(Succeed())
		}
		data, err := json.Marshal(res)
		g.Expect(err).NotTo(HaveOccurred())
		desc, _, err := c.PushArtifact(ctx, spec.Result, "t-"+digest.FromBytes(data).Encoded()[:12], ResultArtifactType,
			[]sign.File{{Name: ResultFile, MediaType: ResultMedia, Data: data}}, spec.annotations())
		g.Expect(err).NotTo(HaveOccurred())
		return desc.Digest
	}
	for _, tc := range []struct {
		name   string
		edit   func(*render.Result)
		sealed bool
		err    string
	}{
		{"a digest that is not its objects'", func(r *render.Result) { r.Digest = "sha256:" + strings.Repeat("1", 64) }, true, "not the digest of its objects"},
		{"Secret data in the clear", nil, false, "carries its data unsealed"},
		{"hooks", func(r *render.Result) {
			r.Hooks = []render.Hook{{Object: testObject("batch/v1", "Job", "j"), Events: []string{"pre-install"}}}
		}, true, "Helm hooks"},
		{"an empty object", func(r *render.Result) { r.Objects = append([]*unstructured.Unstructured{nil}, r.Objects...) }, false, "empty object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			res := good()
			if tc.edit != nil {
				tc.edit(res)
			}
			_, err := Fetch(ctx, c, spec, push(g, res, tc.sealed), key)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
		})
	}
	g := NewWithT(t)
	res := good()
	for i := range 40 {
		res.Warnings = append(res.Warnings, strings.Repeat("w", 2000)+fmt.Sprint(i))
	}
	got, err := Fetch(ctx, c, spec, push(g, res, true), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Warnings).To(HaveLen(maxWarnings + 1))
	g.Expect(len(got.Warnings[0])).To(BeNumerically("<=", maxWarningBytes+len("…")))
	g.Expect(got.Objects[0].Object["stringData"]).To(Equal(map[string]any{"k": "v"}), "opened")

	// A chart's render has hooks: taken when its digest covers them and a hook's
	// Secret was sealed too; refused when a hook's Secret is in the clear.
	chart := *spec
	chart.Request.Chart = &Chart{Ref: "oci://r/charts/c@sha256:" + strings.Repeat("c", 64), Digest: "sha256:" + strings.Repeat("c", 64)}
	hooked := func() *render.Result {
		res := good()
		res.Hooks = []render.Hook{{Object: secret(), Events: []string{"pre-install"}}}
		res.Digest, _ = render.ResultDigest(res.Objects, res.Hooks)
		return res
	}
	got, err = Fetch(ctx, c, &chart, push(g, hooked(), true), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Hooks).To(HaveLen(1))
	g.Expect(got.Hooks[0].Object.Object["stringData"]).To(Equal(map[string]any{"k": "v"}), "a hook's Secret opened")
	_, err = Fetch(ctx, c, &chart, push(g, hooked(), false), key)
	g.Expect(err).To(MatchError(ContainSubstring("carries its data unsealed")))
}

func testObject(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	return u
}

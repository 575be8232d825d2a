package render

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizeTree is a Flux-style layout: a base, an overlay that patches it, and a
// plain directory of YAML with a kustomized subdirectory.
func kustomizeTree() fstest.MapFS {
	return fstest.MapFS{
		"apps/base/kustomization.yaml": {Data: []byte("resources:\n- deployment.yaml\n- service.yaml\n")},
		"apps/base/deployment.yaml": {Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
      - name: podinfo
        image: ghcr.io/stefanprodan/podinfo:6.7.0
`)},
		"apps/base/service.yaml": {Data: []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\nspec:\n  selector: {app: podinfo}\n  ports:\n  - port: 80\n")},
		"apps/prod/kustomization.yaml": {Data: []byte(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: prod
namePrefix: prod-
resources:
- ../base
images:
- name: ghcr.io/stefanprodan/podinfo
  newTag: 6.7.1
replicas:
- name: podinfo
  count: 3
configMapGenerator:
- name: settings
  literals: [LEVEL=info]
  files: [config/app.conf]
patches:
- path: patch.yaml
`)},
		"apps/prod/config/app.conf":     {Data: []byte("listen 80\n")},
		"apps/prod/patch.yaml":          {Data: []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\n  annotations: {team: web}\n")},
		"plain/a.yaml":                  {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {x: \"1\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n")},
		"plain/nested/c.yml":            {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n")},
		"plain/kust/kustomization.yaml": {Data: []byte("nameSuffix: -k\nresources: [d.yaml]\n")},
		"plain/kust/d.yaml":             {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n")},
		"plain/README.md":               {Data: []byte("not YAML\n")},
	}
}

// TestKustomizeBuildsAsKustomizeDoes: an overlay with a base, images, replicas, a
// generator and a patch gives the objects kustomize's own build of the same tree on
// disk gives, and the instance's namespace goes only where kustomize set none.
func TestKustomizeBuildsAsKustomizeDoes(t *testing.T) {
	g := NewWithT(t)
	tree := kustomizeTree()
	res, err := RenderKustomize(context.Background(), Request{Name: "podinfo", Namespace: "team-a", Source: tree, KustomizePath: "./apps/prod"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectsJSON(t, res)).To(ConsistOf(referenceBuild(t, tree, "apps/prod")))
	g.Expect(res.ModuleDigest).To(HavePrefix("sha256:"))
	var names []string
	for _, u := range res.Objects {
		names = append(names, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName())
	}
	g.Expect(names).To(ContainElements("Deployment/prod/prod-podinfo", "Service/prod/prod-podinfo"))
}

// TestKustomizePlainDirectory: a directory without a kustomization builds its YAML
// files (recursively) and the subdirectories that have a kustomization of their own,
// as Flux does; other files are left out; the namespace of the instance fills in.
func TestKustomizePlainDirectory(t *testing.T) {
	g := NewWithT(t)
	res, err := RenderKustomize(context.Background(), Request{Namespace: "team-a", Source: kustomizeTree(), KustomizePath: "plain"})
	g.Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, u := range res.Objects {
		names = append(names, u.GetNamespace()+"/"+u.GetName())
	}
	g.Expect(names).To(ConsistOf("team-a/a", "team-a/b", "team-a/c", "team-a/d-k"))
}

// TestKustomizeRepositoryRoot: "." and "./" name the repository root, whose
// kustomization may name any directory of the repository.
func TestKustomizeRepositoryRoot(t *testing.T) {
	fsys := kustomizeTree()
	fsys["kustomization.yaml"] = &fstest.MapFile{Data: []byte("resources: [apps/prod, plain/a.yaml]\n")}
	for _, p := range []string{".", "./"} {
		g := NewWithT(t)
		res, err := RenderKustomize(context.Background(), Request{Namespace: "team-a", Source: fsys, KustomizePath: p})
		g.Expect(err).NotTo(HaveOccurred(), p)
		var names []string
		for _, u := range res.Objects {
			names = append(names, u.GetKind()+"/"+u.GetName())
		}
		g.Expect(names).To(ContainElements("Deployment/prod-podinfo", "ConfigMap/a"), p)
		roots, err := KustomizeRoots(fsys, p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(roots).To(Equal([]string{".", "apps/base", "apps/prod"}), p)
	}
}

// TestKustomizeDigestFollowsItsBases: the roots include the base an overlay names,
// and a change in the base changes the module digest.
func TestKustomizeDigestFollowsItsBases(t *testing.T) {
	g := NewWithT(t)
	tree := kustomizeTree()
	roots, err := KustomizeRoots(tree, "./apps/prod/")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(roots).To(Equal([]string{"apps/base", "apps/prod"}))
	before, err := RenderKustomize(context.Background(), Request{Source: tree, KustomizePath: "apps/prod"})
	g.Expect(err).NotTo(HaveOccurred())
	tree["apps/base/service.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: podinfo\nspec:\n  ports:\n  - port: 8080\n")}
	after, err := RenderKustomize(context.Background(), Request{Source: tree, KustomizePath: "apps/prod"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.ModuleDigest).NotTo(Equal(before.ModuleDigest))
	g.Expect(after.Digest).NotTo(Equal(before.Digest))
}

// TestKustomizeRefusesWhatLeavesTheRepository: remote bases and files, Helm charts,
// paths out of the repository, exec functions and values are refused with the file
// and the entry, before kustomize runs (it would run git, helm or fetch over HTTP).
func TestKustomizeRefusesWhatLeavesTheRepository(t *testing.T) {
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	tests := []struct {
		name, kustomization string
		values              string
		reason, message     string
	}{
		{name: "remote base over https", kustomization: "resources:\n- https://github.com/org/repo//deploy?ref=v1\n",
			reason: ReasonUnsafeModule, message: `x/kustomization.yaml: "https://github.com/org/repo//deploy?ref=v1" is a remote reference`},
		{name: "github shorthand", kustomization: "resources:\n- github.com/org/repo/deploy\n",
			reason: ReasonUnsafeModule, message: "is a remote reference"},
		{name: "scp-like base", kustomization: "components:\n- git@example.com:org/repo.git\n",
			reason: ReasonUnsafeModule, message: "is a remote reference"},
		{name: "forced git protocol", kustomization: "resources:\n- git::https://example.com/org/repo\n",
			reason: ReasonUnsafeModule, message: "is a remote reference"},
		{name: "remote patch file", kustomization: "resources: [a.yaml]\npatches:\n- path: https://example.com/patch.yaml\n",
			reason: ReasonUnsafeModule, message: "remote bases, files and URLs are not available"},
		{name: "remote generator file", kustomization: "resources: [a.yaml]\nconfigMapGenerator:\n- name: c\n  files: [k=http://example.com/f]\n",
			reason: ReasonUnsafeModule, message: "remote bases, files and URLs are not available"},
		{name: "helm chart", kustomization: "helmCharts:\n- name: podinfo\n  repo: https://stefanprodan.github.io/podinfo\n",
			reason: ReasonUnsafeModule, message: "helmCharts is not available"},
		{name: "out of the repository", kustomization: "resources:\n- ../../etc\n",
			reason: ReasonUnsafeModule, message: `"../../etc" is outside the repository`},
		{name: "absolute path", kustomization: "resources:\n- /etc/passwd\n",
			reason: ReasonUnsafeModule, message: "is an absolute path"},
		{name: "exec function", kustomization: "resources: [a.yaml]\ntransformers: [fn.yaml]\n",
			reason: ReasonRenderFailed, message: "no exec or container functions"},
		{name: "values", kustomization: "resources: [a.yaml]\n", values: `{"replicas":2}`,
			reason: ReasonRenderFailed, message: "values are not available for kustomize directories"},
		{name: "missing base", kustomization: "resources: [../nowhere]\n",
			reason: ReasonRenderFailed, message: "nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tree := fstest.MapFS{
				"x/kustomization.yaml": {Data: []byte(tt.kustomization)},
				"x/a.yaml":             {Data: cm},
				"x/fn.yaml": {Data: []byte("apiVersion: example.com/v1\nkind: Fn\nmetadata:\n  name: fn\n  annotations:\n" +
					"    config.kubernetes.io/function: |\n      exec:\n        path: /bin/sh\n")},
			}
			_, err := RenderKustomize(context.Background(), Request{Source: tree, KustomizePath: "x", Values: []byte(tt.values)})
			g.Expect(err).To(HaveOccurred())
			g.Expect(Reason(err)).To(Equal(tt.reason), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
			g.Expect(err.Error()).To(HavePrefix("kustomize directory x: "))
		})
	}
}

// TestKustomizeLimits: the files staged count against MaxModuleBytes, the objects
// against MaxObjects.
func TestKustomizeLimits(t *testing.T) {
	g := NewWithT(t)
	_, err := RenderKustomize(context.Background(), Request{Source: kustomizeTree(), KustomizePath: "apps/prod", Limits: Limits{MaxModuleBytes: 100}})
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
	g.Expect(err.Error()).To(ContainSubstring("exceed maxModuleBytes (100 bytes)"))
	_, err = RenderKustomize(context.Background(), Request{Source: kustomizeTree(), KustomizePath: "plain", Limits: Limits{MaxObjects: 2}})
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
}

// objectsJSON returns each object of res as canonical JSON.
func objectsJSON(t *testing.T, res *Result) []string {
	var out []string
	for _, u := range res.Objects {
		b, err := json.Marshal(u.Object)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		out = append(out, string(b))
	}
	return out
}

// referenceBuild is kustomize's own build of dir, from a copy of tree on disk, as
// canonical JSON per object.
func referenceBuild(t *testing.T, tree fstest.MapFS, dir string) []string {
	g := NewWithT(t)
	root := t.TempDir()
	for name, f := range tree {
		p := filepath.Join(root, name)
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, f.Data, 0o644)).To(Succeed())
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		var v any
		g.Expect(json.Unmarshal(b, &v)).To(Succeed())
		b, _ = json.Marshal(v)
		out = append(out, string(b))
	}
	return out
}

package render

import (
	"context"
	"testing"
	"testing/fstest"

	. "github.com/onsi/gomega"
)

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name   string
		src    string // "repo" or "examples"
		dir    string
		values string
	}{
		{name: "basic", src: "repo", dir: "modules/basic", values: `{"replicas": 3, "labels": {"team": "a"}}`},
		{name: "basic-defaults", src: "repo", dir: "./modules/basic"},
		{name: "nomodfile", src: "repo", dir: "modules/nomodfile", values: `{"greeting": "hi"}`},
		{name: "embedok", src: "repo", dir: "modules/embedok"},
		{name: "crd-scope", src: "repo", dir: "modules/crd"},
		{name: "webapp", src: "examples", dir: "modules/webapp"},
		{name: "webapp-full", src: "examples", dir: "modules/webapp", values: `{
			"replicas": 3, "image": "ghcr.io/stefanprodan/podinfo:6.7.1", "port": 8080,
			"resources": {"requests": {"cpu": "200m"}},
			"env": {"PODINFO_UI_MESSAGE": "hello", "PODINFO_UI_COLOR": "#34577c"},
			"ingress": {"host": "web.example.com", "className": "nginx"}}`},
		{name: "namespace", src: "examples", dir: "modules/namespace", values: `{
			"name": "team-b", "labels": {"team": "b"}, "quota": {"pods": 50}}`},
		{name: "namespace-open", src: "examples", dir: "modules/namespace", values: `{"defaultDeny": false}`},
	}
	r := NewRenderer()
	defer r.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			src := testRepo
			if tt.src == "examples" {
				src = examplesRepo
			}
			res, err := renderLocal(t, r, src, tt.dir, tt.values)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.ModuleDigest).To(HavePrefix("sha256:"))
			expectGolden(t, tt.name, res)
		})
	}
}

func TestRenderOrderAndNamespaces(t *testing.T) {
	g := NewWithT(t)
	res, err := renderLocal(t, NewRenderer(), testRepo, "modules/basic", "")
	g.Expect(err).NotTo(HaveOccurred())

	var kinds, namespaces []string
	for _, o := range res.Objects {
		kinds = append(kinds, o.GetKind())
		namespaces = append(namespaces, o.GetNamespace())
	}
	g.Expect(kinds).To(Equal([]string{
		"CustomResourceDefinition", "Namespace", "ClusterRole", "ServiceAccount",
		"ConfigMap", "Deployment", "Widget",
	}))
	// Cluster-scoped kinds get no namespace, an explicit namespace is kept,
	// namespaced objects (including custom resources) get the instance's.
	g.Expect(namespaces).To(Equal([]string{"", "", "", "team-a", "other", "team-a", "team-a"}))
}

func TestRenderIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	r := NewRenderer()
	first, err := renderLocal(t, r, examplesRepo, "modules/webapp", `{"env": {"A": "1", "B": "2"}}`)
	g.Expect(err).NotTo(HaveOccurred())
	for range 5 {
		again, err := renderLocal(t, r, examplesRepo, "modules/webapp", `{"env": {"B": "2", "A": "1"}}`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(again.Digest).To(Equal(first.Digest))
		g.Expect(again.ModuleDigest).To(Equal(first.ModuleDigest))
	}
	other, err := renderLocal(t, r, examplesRepo, "modules/webapp", `{"env": {"A": "1", "B": "3"}}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.Digest).NotTo(Equal(first.Digest))
	g.Expect(other.ModuleDigest).To(Equal(first.ModuleDigest))
}

func TestRenderValuesTypes(t *testing.T) {
	tests := []struct {
		name   string
		values string
		check  func(g Gomega, res *Result)
	}{
		{"nil values", "", func(g Gomega, res *Result) {
			g.Expect(res.Objects[0].Object["data"]).To(HaveKeyWithValue("greeting", "hello"))
		}},
		{"null values", "null", func(g Gomega, res *Result) {
			g.Expect(res.Objects[0].Object["data"]).To(HaveKeyWithValue("greeting", "hello"))
		}},
		{"unicode", `{"greeting": "grüß dich \u2603"}`, func(g Gomega, res *Result) {
			g.Expect(res.Objects[0].Object["data"]).To(HaveKeyWithValue("greeting", "grüß dich ☃"))
		}},
	}
	r := NewRenderer()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := renderLocal(t, r, testRepo, "modules/nomodfile", tt.values)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Objects).To(HaveLen(1))
			tt.check(g, res)
		})
	}
}

func TestRenderRequestErrors(t *testing.T) {
	tests := []struct {
		name   string
		req    Request
		reason string
	}{
		{"no module", Request{Name: "a", Namespace: "b"}, ReasonModuleNotFound},
		{"both modules", Request{LocalPath: "modules/basic", CUEModule: &CUEModuleRef{Path: "x.com/a@v0", Version: "v0.1.0"}}, ReasonRenderFailed},
		{"missing directory", Request{Source: testRepo, LocalPath: "modules/nope"}, ReasonModuleNotFound},
		{"no source", Request{LocalPath: "modules/basic"}, ReasonModuleNotFound},
		{"a file, not a directory", Request{Source: testRepo, LocalPath: "secret.txt"}, ReasonModuleNotFound},
		{"no CUE files", Request{Source: testRepo, LocalPath: "modules"}, ReasonModuleNotFound},
		{"parent path", Request{Source: testRepo, LocalPath: "../repo/modules/basic"}, ReasonUnsafeModule},
		{"absolute path", Request{Source: testRepo, LocalPath: "/etc"}, ReasonUnsafeModule},
		{"registry module without registry", Request{CUEModule: &CUEModuleRef{Path: "example.com/app@v0", Version: "v0.1.0"}}, ReasonModuleNotFound},
		{"invalid module version", Request{CUEModule: &CUEModuleRef{Path: "example.com/app@v0", Version: "latest"}, Registry: &ModuleRegistry{Host: "127.0.0.1:1"}}, ReasonModuleNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewRenderer().Render(context.Background(), tt.req)
			g.Expect(Reason(err)).To(Equal(tt.reason), "error: %v", err)
		})
	}
}

func TestRenderContractFields(t *testing.T) {
	tests := []struct {
		name, src, message string
	}{
		{"no objects", "package app\ninstance: _\n", "module has no objects field"},
		{"objects not a struct", "package app\nobjects: 3\n", "objects must be a struct or a list, not int"},
		{"instance constrained", "package app\ninstance: name: \"other\"\nobjects: {}\n", `instance.name: conflicting values "web" and "other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := renderLocal(t, NewRenderer(), fstest.MapFS{"m/main.cue": {Data: []byte(tt.src)}}, "m", "")
			g.Expect(Reason(err)).To(Equal(ReasonRenderFailed), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.message))
		})
	}
}

func TestRenderEmptyObjects(t *testing.T) {
	g := NewWithT(t)
	res, err := renderLocal(t, NewRenderer(), fstest.MapFS{"m/main.cue": {Data: []byte("package app\nobjects: {}\n")}}, "m", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(BeEmpty())
	g.Expect(res.Digest).To(Equal("sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945")) // sha256("[]")
}

func TestStage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Stage("CustomResourceDefinition")).To(Equal(StageCRDs))
	g.Expect(Stage("Namespace")).To(Equal(StageNamespaces))
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		g.Expect(Stage(k)).To(Equal(StageRBAC), k)
	}
	g.Expect(Stage("Deployment")).To(Equal(StageOthers))
}

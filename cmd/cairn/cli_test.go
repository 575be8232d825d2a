package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// cliModule renders a ConfigMap and a Deployment, and a Secret when a password is given.
const cliModule = `package app

instance: {name: string, namespace: string}
values: {
	replicas: *0 | int & >=0
	password: *"" | string
}
objects: {
	config: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: "\(instance.name)-config"
		data: replicas: "\(values.replicas)"
	}
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: values.replicas
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: containers: [{name: "app", image: "ghcr.io/stefanprodan/podinfo:6.7.0"}]
			}
		}
	}
	if values.password != "" {
		secret: {
			apiVersion: "v1"
			kind:       "Secret"
			metadata: name: "\(instance.name)-creds"
			stringData: password: values.password
		}
	}
}
`

// brokenModule has a syntax error on line 5.
const brokenModule = `package app

instance: {name: string, namespace: string}
values: {}
objects: cm: {apiVersion: "v1" kind: "ConfigMap"}
`

const cliPlatform = `apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  namespaces:
    allow: ["*"]
    deny: ["kube-*"]
`

func cliInstance(ns, name, module, values string) string {
	return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: " + name +
		"\n  namespace: " + ns + "\nspec:\n  module:\n    local:\n      path: ./modules/" + module +
		"\n  timeout: 1m\n  values: " + values + "\n"
}

// cliRepo returns the files of a platform directory with the app and broken modules.
func cliRepo(instances map[string]string) map[string]string {
	files := map[string]string{
		"platform.yaml":           cliPlatform,
		"modules/app/main.cue":    cliModule,
		"modules/broken/main.cue": brokenModule,
	}
	for name, doc := range instances {
		files["instances/"+name+".yaml"] = doc
	}
	return files
}

func writeRepoDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cliResult is what one run of the command printed and the exit code main gives it.
type cliResult struct {
	stdout, stderr string
	code           int
	err            error
}

func execCairn(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: exitCodeOf(err), err: err}
}

// exitCodeOf mirrors main: 2 when instances failed, 1 for any other error.
func exitCodeOf(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errInstancesFailed):
		return 2
	}
	return 1
}

// yamlDocuments parses the "---"-separated output of render.
func yamlDocuments(g *WithT, out string) []map[string]any {
	var docs []map[string]any
	for _, part := range strings.Split(out, "---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var m map[string]any
		g.Expect(yaml.Unmarshal([]byte(part), &m)).To(Succeed(), part)
		docs = append(docs, m)
	}
	return docs
}

func labelsOf(obj map[string]any) map[string]any {
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	return labels
}

func TestRenderPrintsLabelledYAML(t *testing.T) {
	g := NewWithT(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance("team-a", "web", "app", "{replicas: 2}")}))
	r := execCairn(t, "render", "--repo", dir, "--cache-dir", t.TempDir())
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.code).To(Equal(0))
	docs := yamlDocuments(g, r.stdout)
	g.Expect(docs).To(HaveLen(2))
	for _, d := range docs {
		g.Expect(labelsOf(d)).To(HaveKeyWithValue(cairnv1.ManagedByLabel, cairnv1.ManagedByValue))
		g.Expect(labelsOf(d)).To(HaveKeyWithValue(cairnv1.InstanceLabel, cairnv1.InstanceKey("team-a", "web")))
	}
	g.Expect(r.stdout).To(ContainSubstring("# team-a/web\n"))
	g.Expect(r.stdout).To(ContainSubstring("replicas: 2"))
}

func TestRenderJSONIsAValidList(t *testing.T) {
	g := NewWithT(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance("team-a", "web", "app", "{}")}))
	r := execCairn(t, "render", "--repo", dir, "-o", "json", "--cache-dir", t.TempDir())
	g.Expect(r.code).To(Equal(0), r.stderr)
	g.Expect(json.Valid([]byte(r.stdout))).To(BeTrue(), r.stdout)
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(r.stdout), &list)).To(Succeed())
	g.Expect(list.Kind).To(Equal("List"))
	g.Expect(list.Items).To(HaveLen(2))
	g.Expect(labelsOf(list.Items[0])).To(HaveKeyWithValue(cairnv1.InstanceLabel, cairnv1.InstanceKey("team-a", "web")))
}

func TestRenderErrorNamesFileAndLineAndExitsTwo(t *testing.T) {
	g := NewWithT(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{
		"web":    cliInstance("team-a", "web", "app", "{}"),
		"broken": cliInstance("team-a", "broken", "broken", "{}"),
	}))
	r := execCairn(t, "render", "--repo", dir, "--cache-dir", t.TempDir())
	g.Expect(r.err).To(MatchError(errInstancesFailed))
	g.Expect(r.code).To(Equal(2))
	g.Expect(r.stderr).To(ContainSubstring("error: team-a/broken: modules/broken/main.cue:5:"))
	g.Expect(r.stderr).To(ContainSubstring("missing ','"))
	g.Expect(r.stdout).To(ContainSubstring("# team-a/web\n"), "the good instance is still printed")
	g.Expect(r.stdout).NotTo(ContainSubstring("team-a/broken"))
}

func TestVersionCommand(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "version")
	g.Expect(r.code).To(Equal(0))
	g.Expect(r.stdout).To(Equal("cairn " + version + "\n"))
}

func TestBadOutputFormatIsAClearError(t *testing.T) {
	dir := writeRepoDir(t, cliRepo(nil))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"render", "--repo", dir, "-o", "xml"}, `--output must be yaml or json, not "xml"`},
		{[]string{"plan", "--repo", dir, "-o", "yaml"}, `--output must be text, json or markdown, not "yaml"`},
		{[]string{"status", "-o", "yaml"}, `--output must be table or json, not "yaml"`},
		{[]string{"history", "team-a/web", "-o", "yaml"}, `--output must be table or json, not "yaml"`},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			g := NewWithT(t)
			r := execCairn(t, tt.args...)
			g.Expect(r.code).To(Equal(1))
			g.Expect(r.err).To(MatchError(tt.want))
			g.Expect(r.stdout).To(BeEmpty())
		})
	}
}

// TestRenderReportsASymlinkAndNeverPrintsItsTarget: a symbolic link is never
// followed: where declarations are read it is a file that could not be read (exit 2,
// naming it), in a module it fails that instance only; the other instances render.
func TestRenderReportsASymlinkAndNeverPrintsItsTarget(t *testing.T) {
	g := NewWithT(t)
	passwd, err := os.ReadFile("/etc/passwd")
	g.Expect(err).NotTo(HaveOccurred())
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance("team-a", "web", "app", "{}")}))
	g.Expect(os.Symlink("/etc/passwd", filepath.Join(dir, "instances", "passwd.yaml"))).To(Succeed())

	r := execCairn(t, "render", "--repo", dir, "--cache-dir", t.TempDir())
	g.Expect(r.code).To(Equal(2))
	g.Expect(r.stderr).To(ContainSubstring(`instances/passwd.yaml: not a regular file (symbolic links are not followed)`))
	g.Expect(r.stdout).To(ContainSubstring("# team-a/web\n"), "the instance renders")
	g.Expect(r.stdout + r.stderr).NotTo(ContainSubstring(firstLine))
}

package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// providerModule renders the CRD of Widget.example.com (and a Deployment of
// its controller); requirerModule renders a Widget.
const providerModule = `package provider

instance: {name: string, namespace: string}
values: {}
objects: {
	crd: {
		apiVersion: "apiextensions.k8s.io/v1"
		kind:       "CustomResourceDefinition"
		metadata: name: "widgets.example.com"
		spec: {
			group: "example.com"
			scope: "Namespaced"
			names: {kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList"}
			versions: [{name: "v1", served: true, storage: true, schema: openAPIV3Schema: {type: "object", "x-kubernetes-preserve-unknown-fields": true}}]
		}
	}
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "widget-controller"}
}
`

const requirerModule = `package requirer

instance: {name: string, namespace: string}
values: {}
objects: widget: {apiVersion: "example.com/v1", kind: "Widget", metadata: name: instance.name}
`

func graphRepo() map[string]string {
	files := cliRepo(map[string]string{
		"a-web":    cliInstance("team-a", "web", "requirer", "{}") + "  dependsOn: [{name: db}]\n",
		"b-db":     cliInstance("team-a", "db", "app", "{}"),
		"c-broken": cliInstance("team-b", "broken", "broken", "{}"),
		"z-widget": cliInstance("infra", "widgets", "provider", "{}"),
	})
	files["platform.yaml"] = cliPlatform + "  clusterResources:\n    - {group: apiextensions.k8s.io, kind: CustomResourceDefinition}\n"
	files["modules/provider/main.cue"] = providerModule
	files["modules/requirer/main.cue"] = requirerModule
	return files
}

// TestGraphDrawsDependsOnAndContractEdges: cairn graph draws the dependsOn edge its
// author wrote and the contract edge the renders imply (the requirer is declared
// before the provider and names no dependsOn on it), and marks the instance that
// fails to render; each format is compared with a golden file.
func TestGraphDrawsDependsOnAndContractEdges(t *testing.T) {
	dir := writeRepoDir(t, graphRepo())
	for _, format := range []string{"text", "mermaid", "dot"} {
		t.Run(format, func(t *testing.T) {
			g := NewWithT(t)
			r := execCairn(t, "graph", "--repo", dir, "--cache-dir", t.TempDir(), "-o", format)
			g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
			path := filepath.Join("testdata", "graph."+format)
			if *updateGolden {
				g.Expect(os.WriteFile(path, []byte(r.stdout), 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run go test ./cmd/cairn -run TestGraph -update")
			g.Expect(r.stdout).To(Equal(string(want)))
		})
	}
}

func TestGraphRefusesAnUnknownFormat(t *testing.T) {
	g := NewWithT(t)
	r := execCairn(t, "graph", "--repo", t.TempDir(), "-o", "svg")
	g.Expect(r.err).To(MatchError(`--output: unknown graph format "svg" (one of text, mermaid, dot)`))
}

// TestGraphStatusMarksWaitingAndFailedInstancesFromTheCluster: with --status,
// cairn graph reads the instances' status from the cluster: an instance that
// renders but waits for a failed dependency is marked waiting, which no render
// shows, next to the dependency that fails; without --status it is not.
func TestGraphStatusMarksWaitingAndFailedInstancesFromTheCluster(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{
		"web":    cliInstance(cc.ns, "web", "app", "{}") + "  dependsOn: [{name: broken}]\n",
		"broken": cliInstance(cc.ns, "broken", "broken", "{}"),
	}))
	r := cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.code).To(Equal(2), r.stdout+r.stderr)

	r = cc.run(t, "graph", "--repo", dir, "--status")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(Equal(fmt.Sprintf("%[1]s/broken [Failed]\n%[1]s/web [Waiting]\n  after %[1]s/broken (dependsOn)\n", cc.ns)))

	r = cc.run(t, "graph", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(ContainSubstring(cc.ns+"/web\n"), "offline, nothing says web waits")
}

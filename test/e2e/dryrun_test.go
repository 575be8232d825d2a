package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// objectRequests keeps the requests to one object of the test's namespace.
func objectRequests(ns, resource, name string) func(loggedRequest) bool {
	p := "/namespaces/" + ns + "/" + resource + "/" + name
	return func(r loggedRequest) bool { return strings.HasSuffix(r.path, p) }
}

// applies keeps the server-side applies (or their dry-runs) of rendered objects.
func applies(dryRun bool) func(loggedRequest) bool {
	return func(r loggedRequest) bool {
		return r.method == http.MethodPatch && r.apply && r.dryRun == dryRun && !strings.Contains(r.path, "/cairn.dev/")
	}
}

func both(a, b func(loggedRequest) bool) func(loggedRequest) bool {
	return func(r loggedRequest) bool { return a(r) && b(r) }
}

// TestDryRunBeforeWritesLeavesNothingHalfApplied: three changed objects, one of them
// invalid: all are dry-run first, none is written, and the failure names the invalid
// one with the API server's message. A one-object change still costs one request.
func TestDryRunBeforeWritesLeavesNothingHalfApplied(t *testing.T) {
	e, log := newLoggedEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	repo := newGitRepo(t, appRepo("", a))
	mark := time.Now()
	good := e.syncClean(repo)
	e.g.Expect(log.since(mark, both(objectRequests(e.ns, "configmaps", "a-x"), applies(true)))).To(HaveLen(1),
		"two changed objects (a cold apply) are dry-run first")

	a.configs = map[string]string{"x": "changed", "new": "v"}
	bad := replaceOnce(a.yaml(), "    configs:\n", "    badService: true\n    configs:\n")
	repo.commit("change a-x, add a-new and an invalid Service", map[string]string{"instances/a.yaml": bad})
	mark = time.Now()
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "a", reason: cairnv1.ReasonApplyFailed, contains: []string{
		"Service/{ns}/a-bad dry-run failed", "spec.ports[0].port", "99999", "nothing of it was written"}})
	e.g.Expect(e.configMap(e.ns, "a-new")).To(BeNil(), "no object is written when one fails its dry-run")
	e.g.Expect(e.configMap(e.ns, "a-x").Data).To(HaveKeyWithValue("value", "v-x"))
	e.g.Expect(e.get("v1", "Service", e.ns, "a-bad")).To(BeNil())
	e.g.Expect(log.since(mark, applies(false))).To(BeEmpty(), "no apply request was sent")
	e.expectLastGood("a", good, "x")
	e.g.Expect(isTrue(e.instance(e.ns, "a"), "Stalled")).To(BeTrue())

	a.configs = map[string]string{"x": "changed"}
	repo.commit("change a-x only", map[string]string{"instances/a.yaml": a.yaml()})
	mark = time.Now()
	r := result(e.sync(repo), e.ns, "a")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(r.Applied).To(Equal(1))
	var sent []string
	for _, req := range log.since(mark, objectRequests(e.ns, "configmaps", "a-x")) {
		sent = append(sent, fmt.Sprintf("%s apply=%t dryRun=%t", req.method, req.apply, req.dryRun))
	}
	e.g.Expect(sent).To(Equal([]string{"PATCH apply=true dryRun=false"}), "one changed object costs exactly one request, its apply")
	e.g.Expect(e.configMap(e.ns, "a-x").Data).To(HaveKeyWithValue("value", "changed"))
}

// widgetsDir is a plain YAML directory: the ConfigMap keep in the instance's namespace
// (data value: keep) and, with more, a Namespace ns, a CRD of Widget in group (spec.size
// an integer), a Widget of size in ns and a ConfigMap in ns.
func widgetsDir(keep, ns, group, size string, more bool) map[string]string {
	files := map[string]string{
		"apps/widgets/keep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata: {value: " + keep + "}\n",
	}
	resources := "resources: [keep.yaml]\n"
	if more {
		resources = "resources: [keep.yaml, namespace.yaml, crd.yaml, widget.yaml, config.yaml]\n"
		files["apps/widgets/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n"
		files["apps/widgets/crd.yaml"] = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.` + group + `
spec:
  group: ` + group + `
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
`
		if size == "colored" { // a changed CRD (spec.color) and a Widget of the wrong color
			files["apps/widgets/crd.yaml"] += "                color: {type: string}\n"
			size = "3\n  color: 5"
		}
		files["apps/widgets/widget.yaml"] = "apiVersion: " + group + "/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: " + ns +
			"\nspec:\n  size: " + size + "\n"
		files["apps/widgets/config.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: " + ns + "\ndata: {value: c}\n"
	}
	files["apps/widgets/kustomization.yaml"] = resources
	return files
}

// TestInvalidObjectOfANewCRDLeavesNothingOfTheChange: a commit adds a Namespace, a CRD,
// a custom resource of it whose field has the wrong type, and a ConfigMap in the
// Namespace, and changes a ConfigMap that existed. The custom resource and the new
// ConfigMap can only be dry-run once the Namespace and the CRD exist: those are
// written, the dry-run fails, and they are taken back. Nothing of the commit is left:
// no Namespace, no CRD, no write of the Widget or of either ConfigMap; the instance is
// Failed (ApplyFailed, Stalled) naming the Widget and its field, and keeps its last
// good revision, inventory and ConfigMap. The commit that fixes the field applies all;
// then a change of that CRD whose Widget fails is taken back: the CRD keeps its schema.
func TestInvalidObjectOfANewCRDLeavesNothingOfTheChange(t *testing.T) {
	e, log := newLoggedEnv(t)
	ns, group := e.ns+"-w", e.ns+".validate.example.com"
	crd := "widgets." + group
	e.deleteNamespacesAtEnd(ns)
	t.Cleanup(func() {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		u.SetName(crd)
		_ = e.c.Delete(context.Background(), u)
	})
	files := appRepo("")
	maps.Copy(files, widgetsDir("old", ns, group, "", false))
	files["instances/widgets.yaml"] = kustomizeInstance("widgets", e.ns, "./apps/widgets")
	repo := newGitRepo(t, files)
	good := e.syncClean(repo)
	before := e.instance(e.ns, "widgets")

	repo.commit("a namespace, a CRD, a bad widget, a config", widgetsDir("new", ns, group, `"big"`, true))
	mark := time.Now()
	res := e.sync(repo)
	e.expectFailure(res, wantFailure{name: "widgets", reason: cairnv1.ReasonApplyFailed, contains: []string{
		"Widget/" + ns + "/w dry-run failed",
		".spec.size: expected numeric (int or float), got string",
		"written first to validate the rest and taken back: CustomResourceDefinition/" + crd + ", Namespace/" + ns}})
	e.g.Eventually(func() bool { return e.gone("v1", "Namespace", "", ns) }, 30*time.Second, 100*time.Millisecond).
		Should(BeTrue(), "the Namespace this sync created is deleted")
	e.g.Eventually(func() *unstructured.Unstructured {
		return e.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
	}, 30*time.Second, 100*time.Millisecond).Should(BeNil(), "the CRD this sync created is deleted")
	e.g.Expect(e.configMap(ns, "c")).To(BeNil())
	e.g.Expect(log.since(mark, both(objectRequests(ns, "widgets", "w"), applies(true)))).To(HaveLen(1), "the Widget was dry-run")
	for _, o := range []func(loggedRequest) bool{objectRequests(ns, "widgets", "w"), objectRequests(ns, "configmaps", "c"),
		objectRequests(e.ns, "configmaps", "keep")} {
		e.g.Expect(log.since(mark, both(o, applies(false)))).To(BeEmpty(), "nothing but the first stage was written")
	}
	e.g.Expect(e.configMap(e.ns, "keep").Data).To(HaveKeyWithValue("value", "old"))
	after := e.instance(e.ns, "widgets")
	e.g.Expect(after.Status.LastAppliedRevision).To(Equal(good))
	e.g.Expect(after.Status.Inventory).To(Equal(before.Status.Inventory), "the inventory is the last good one")
	e.g.Expect(isTrue(after, "Ready")).To(BeFalse())
	e.g.Expect(isTrue(after, "Stalled")).To(BeTrue())

	repo.commit("the widget's size is an integer", widgetsDir("new", ns, group, "3", true))
	e.g.Eventually(func() bool { return e.get("v1", "Namespace", "", ns) == nil }, time.Minute, 200*time.Millisecond).
		Should(BeTrue(), "the namespace controller finishes the deletion")
	r := result(e.sync(repo), e.ns, "widgets")
	e.g.Expect(r.Ready).To(BeTrue(), r.Message)
	e.g.Expect(e.get(group+"/v1", "Widget", ns, "w")).NotTo(BeNil())
	e.g.Expect(e.configMap(ns, "c")).NotTo(BeNil())
	e.g.Expect(e.configMap(e.ns, "keep").Data).To(HaveKeyWithValue("value", "new"))

	// A change of the CRD that existed is taken back too: the CRD gets its previous
	// schema back, and stays, as does the Widget.
	repo.commit("a color, of the wrong type", widgetsDir("new", ns, group, "colored", true))
	e.expectFailure(e.sync(repo), wantFailure{name: "widgets", reason: cairnv1.ReasonApplyFailed, contains: []string{
		"Widget/" + ns + "/w dry-run failed", ".spec.color: expected string, got",
		"written first to validate the rest and taken back: CustomResourceDefinition/" + crd}})
	live := e.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
	e.g.Expect(live).NotTo(BeNil())
	versions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
	e.g.Expect(versions).To(HaveLen(1))
	spec, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties")
	e.g.Expect(spec).To(HaveKey("size"))
	e.g.Expect(spec).NotTo(HaveKey("color"), "the CRD's change is taken back")
	e.g.Expect(e.get(group+"/v1", "Widget", ns, "w")).NotTo(BeNil())
}

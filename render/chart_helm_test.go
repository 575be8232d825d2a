package render

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// The charts of the Helm fidelity tests, and the output of `helm template`
// v3.22.0 for each (<chart>.yaml, or <chart>.err for a chart Helm refuses),
// written by hack/helm-golden.sh.
const (
	helmCharts = "testdata/helm/charts"
	helmGolden = "testdata/helm/golden"
)

// TestChartsParseAsHelmInstalls renders each chart under testdata/helm/charts
// through cairn's chart render and compares its objects, one by one, with the
// output of `helm template web CHART --namespace team-a --include-crds` of
// Helm v3.22.0 parsed the way `helm install` parses the manifest it renders
// (kube.Build: the resource builder of k8s.io/cli-runtime, lists flattened,
// the release namespace given to namespaced objects and taken from
// cluster-scoped ones). The charts cover block scalars (|, |-, |+, >, >+) at
// the end of a document, in the middle and at the end of the file, "---"
// inside strings and block scalars, odd separators, empty documents and
// documents of comments, List kinds, NOTES.txt, subcharts with their own
// values, global values, a library chart, CRDs in crds/, templates and
// directories starting with "_", and YAML scalars of every type. A chart that
// Helm refuses (a template rendering a YAML sequence or plain text) is
// refused by cairn too (InvalidObject), naming the same template, and so is
// one that helm template prints but helm install refuses (a mapping without
// a kind).
//
// Hooks (helm.sh/hook), which helm template prints after the manifests, are
// compared with Result.Hooks: the same objects, those of a test, test-success
// or rollback event alone left out (cairn never runs them) and those of an
// unknown event skipped by both.
func TestChartsParseAsHelmInstalls(t *testing.T) {
	entries, err := os.ReadDir(helmCharts)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			archive := chartArchive(t, name, dirFiles(t, filepath.Join(helmCharts, name)))
			res, renderErr := RenderChart(context.Background(), chartRequest(archive, ""))
			if refusal, err := os.ReadFile(filepath.Join(helmGolden, name+".err")); err == nil {
				g.Expect(Reason(renderErr)).To(Equal(ReasonInvalidObject), "%v", renderErr)
				g.Expect(renderErr.Error()).To(ContainSubstring(helmErrorFile(t, string(refusal))))
				return
			}
			manifest, err := os.ReadFile(filepath.Join(helmGolden, name+".yaml"))
			g.Expect(err).NotTo(HaveOccurred(), "no golden file: run hack/helm-golden.sh")
			want, wantHooks, err := helmInstallObjects(manifest, "team-a")
			if err != nil { // helm template prints it, helm install refuses it
				g.Expect(Reason(renderErr)).To(Equal(ReasonInvalidObject), "helm install refuses it: %v; cairn: %v", err, renderErr)
				return
			}
			g.Expect(renderErr).NotTo(HaveOccurred())
			got := objectsByID(res.Objects)
			g.Expect(slices.Sorted(maps.Keys(got))).To(Equal(slices.Sorted(maps.Keys(want))))
			for _, id := range slices.Sorted(maps.Keys(want)) {
				g.Expect(got[id]).To(Equal(want[id]), "object %s", id)
			}
			var hooks []*unstructured.Unstructured
			for _, h := range res.Hooks {
				hooks = append(hooks, h.Object)
			}
			g.Expect(objectsByID(hooks)).To(Equal(wantHooks))
		})
	}
}

// TestHelmGoldenFilesAreCurrent runs hack/helm-golden.sh with the helm
// v3.22.0 binary ($CAIRN_HELM, which make test provides) into a temporary
// directory and compares its output with the committed golden files, byte for
// byte.
func TestHelmGoldenFilesAreCurrent(t *testing.T) {
	g := NewWithT(t)
	helm := helmBinary(t)
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "hack", "helm-golden.sh"), out)
	cmd.Env = append(os.Environ(), "CAIRN_HELM="+helm)
	log, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "hack/helm-golden.sh: %s", log)
	fresh, committed := dirFiles(t, out), dirFiles(t, helmGolden)
	g.Expect(slices.Sorted(maps.Keys(fresh))).To(Equal(slices.Sorted(maps.Keys(committed))))
	for name, data := range fresh {
		g.Expect(data).To(Equal(committed[name]), "%s differs from helm template's output (run hack/helm-golden.sh)", name)
	}
}

// helmBinary is the helm v3.22.0 CLI (see baselineCLI).
func helmBinary(t *testing.T) string {
	return baselineCLI(t, "helm", "v3.22.0", "CAIRN_HELM")
}

// baselineCLI is the CLI a render is compared with: $env (make test sets it),
// else the one hack/bench-tools.sh has built. Without either the test fails.
func baselineCLI(t *testing.T, name, version, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if dir, err := exec.Command(filepath.Join("..", "hack", "bench-tools.sh"), "--cached").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(dir)), name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s %s is missing: set %s to its binary, or build it with hack/bench-tools.sh (make test does)", name, version, env)
	return ""
}

// helmErrorFile is the template a `helm template` error names.
func helmErrorFile(t *testing.T, msg string) string {
	t.Helper()
	m := regexp.MustCompile(`YAML parse error on (\S+):`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("helm's error names no template: %s", msg)
	}
	return m[1]
}

// helmInstallObjects parses a manifest the way `helm install` does
// (kube.Client.Build, with the builder options of kube.Client.newBuilder)
// against helmTestMapper, and returns by ID its objects that are not hooks,
// and its hooks of an install, upgrade or delete event.
func helmInstallObjects(manifest []byte, namespace string) (objects, hooks map[string]map[string]any, err error) {
	infos, err := resource.NewBuilder(helmTestGetter{}).Unstructured().ContinueOnError().
		NamespaceParam(namespace).DefaultNamespace().Flatten().
		Stream(bytes.NewReader(manifest), "").Do().Infos()
	if err != nil {
		return nil, nil, err
	}
	var objs, hks []*unstructured.Unstructured
	for _, info := range infos {
		u := info.Object.(*unstructured.Unstructured)
		events, hook := u.GetAnnotations()["helm.sh/hook"]
		switch {
		case !hook:
			objs = append(objs, u)
		case regexp.MustCompile(`(^|,)\s*(pre|post)-(install|upgrade|delete)\s*(,|$)`).MatchString(strings.ToLower(events)):
			hks = append(hks, u)
		}
	}
	return objectsByID(objs), objectsByID(hks), nil
}

func objectsByID(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, u := range objs {
		id := fmt.Sprintf("%s %s/%s", u.GroupVersionKind(), u.GetNamespace(), u.GetName())
		if _, dup := out[id]; dup {
			panic("duplicate object " + id)
		}
		out[id] = u.Object
	}
	return out
}

// helmTestGetter stands for the cluster helm install would talk to: its REST
// mapper knows the kinds of the test charts (their CRDs included) and the List
// kinds discovery adds; nothing is ever sent.
type helmTestGetter struct{}

func (helmTestGetter) ToRESTConfig() (*rest.Config, error) {
	return &rest.Config{Host: "https://127.0.0.1:1"}, nil
}

func (helmTestGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return nil, fmt.Errorf("no discovery in the Helm fidelity test")
}

func (helmTestGetter) ToRESTMapper() (meta.RESTMapper, error) {
	m := meta.NewDefaultRESTMapper(nil)
	kinds := map[string][]string{
		"v1":                           {"ConfigMap", "Secret", "Service", "Pod", "ServiceAccount"},
		"apps/v1":                      {"Deployment"},
		"batch/v1":                     {"Job"},
		"rbac.authorization.k8s.io/v1": {"ClusterRole"},
		"apiextensions.k8s.io/v1":      {"CustomResourceDefinition"},
		"example.com/v1":               {"Gadget", "Widget"},
		"backend.example.com/v1":       {"Thing"},
	}
	cluster := map[string]bool{"ClusterRole": true, "CustomResourceDefinition": true, "Widget": true}
	for gv, ks := range kinds {
		v, _ := schema.ParseGroupVersion(gv)
		for _, k := range ks {
			scope := meta.RESTScopeNamespace
			if cluster[k] {
				scope = meta.RESTScopeRoot
			}
			m.Add(v.WithKind(k), scope)
			m.Add(v.WithKind(k+"List"), scope)
		}
		m.Add(v.WithKind("List"), meta.RESTScopeRoot)
	}
	return m, nil
}

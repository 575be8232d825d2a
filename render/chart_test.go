package render

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/mod/modfile"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRenderChart renders the podinfo chart: its templates with the release
// and the values, its subchart, the CRDs of both first, namespaces given to
// namespaced objects (the scope of custom kinds from the CRDs); NOTES.txt,
// partials and the test hook left out, the install hook among the hooks;
// nothing from a cluster.
func TestRenderChart(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "podinfo", chartFiles(t, "podinfo"))

	res, err := RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(res)).To(Equal([]string{
		"CustomResourceDefinition//cacheclasses.example.com",
		"CustomResourceDefinition//widgets.example.com",
		"ClusterRole//web-podinfo-reader",
		"CacheClass//web-default",
		"ConfigMap/team-a/web-podinfo",
		"Deployment/team-a/web-cache",
		"Deployment/team-a/web-podinfo",
		"Service/team-a/web-podinfo",
		"Widget/team-a/web-podinfo",
	}))
	g.Expect(res.ModuleDigest).To(Equal(testChartDigest))
	g.Expect(res.Digest).To(HavePrefix("sha256:"))
	g.Expect(res.Warnings).To(BeEmpty())
	g.Expect(res.Hooks).To(HaveLen(1))
	g.Expect(res.Hooks[0].String()).To(Equal("Job/team-a/web-podinfo-migrate"))
	g.Expect(res.Hooks[0].Events).To(Equal([]string{HookPreInstall, HookPreUpgrade}))
	g.Expect(res.Hooks[0].Source).To(Equal("podinfo/templates/hook-job.yaml"))
	g.Expect(nested(res, "ConfigMap", "web-podinfo", "data")).To(Equal(map[string]any{
		"message": "hello from podinfo", "release": "web", "revision": "1", "install": "true",
		"kubeVersion": DefaultKubeVersion, "lookup": "0", "host": "",
	}))
	g.Expect(nested(res, "Deployment", "web-podinfo", "spec", "replicas")).To(Equal(int64(1)))
	g.Expect(nested(res, "Deployment", "web-cache", "spec", "template", "spec", "containers")).To(
		ContainElement(HaveKeyWithValue("args", []any{"--maxmemory", "64mb"})))
	expectGolden(t, "../charts/golden/podinfo", res) // chart goldens live under testdata/charts

	again, err := RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Digest).To(Equal(res.Digest))
}

// TestRenderChartConcurrent: renders of one archive from many goroutines
// give the same digest (and, under -race, share nothing unsynchronised).
func TestRenderChartConcurrent(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "podinfo", chartFiles(t, "podinfo"))
	digests := make(chan string, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			res, err := RenderChart(context.Background(), chartRequest(archive, fmt.Sprintf(`{"replicaCount": %d}`, i%2)))
			if err != nil {
				digests <- err.Error()
				return
			}
			digests <- res.Digest
		})
	}
	wg.Wait()
	close(digests)
	seen := map[string]int{}
	for d := range digests {
		seen[d]++
	}
	g.Expect(seen).To(HaveLen(2))
	for d, n := range seen {
		g.Expect(d).To(HavePrefix("sha256:"))
		g.Expect(n).To(Equal(4))
	}
}

// TestRenderChartValues: values override the chart's defaults, reach the
// subchart under its name, enable or disable it by its condition, and change
// the digest.
func TestRenderChartValues(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "podinfo", chartFiles(t, "podinfo"))
	plain, err := RenderChart(context.Background(), chartRequest(archive, ""))
	g.Expect(err).NotTo(HaveOccurred())

	res, err := RenderChart(context.Background(), chartRequest(archive,
		`{"replicaCount": 3, "message": "hi", "cache": {"maxMemory": "128mb"}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nested(res, "Deployment", "web-podinfo", "spec", "replicas")).To(Equal(int64(3)))
	g.Expect(nested(res, "ConfigMap", "web-podinfo", "data", "message")).To(Equal("hi"))
	g.Expect(nested(res, "Deployment", "web-podinfo", "spec", "template", "spec", "containers")).To(
		ContainElement(HaveKeyWithValue("image", "ghcr.io/stefanprodan/podinfo:6.7.0")), "defaults stay")
	g.Expect(nested(res, "Deployment", "web-cache", "spec", "template", "spec", "containers")).To(
		ContainElement(HaveKeyWithValue("args", []any{"--maxmemory", "128mb"})))
	g.Expect(res.Digest).NotTo(Equal(plain.Digest))

	res, err = RenderChart(context.Background(), chartRequest(archive, `{"cache": {"enabled": false}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(res)).NotTo(ContainElement("Deployment/team-a/web-cache"))
	g.Expect(objectIDs(res)).To(ContainElement("Deployment/team-a/web-podinfo"))

	// The release is the instance.
	req := chartRequest(archive, "")
	req.Name, req.Namespace = "api", "team-b"
	res, err = RenderChart(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(res)).To(ContainElements("ConfigMap/team-b/api-podinfo", "Deployment/team-b/api-cache"))
}

// TestRenderChartSubchartArchive: a subchart packed as charts/*.tgz renders
// exactly like the same subchart as a directory.
func TestRenderChartSubchartArchive(t *testing.T) {
	g := NewWithT(t)
	files := chartFiles(t, "podinfo")
	dir, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", files), ""))
	g.Expect(err).NotTo(HaveOccurred())

	cache, rest := subFiles(files, "charts/cache")
	rest["charts/cache-0.1.0.tgz"] = string(chartArchive(t, "cache", cache))
	packed, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", rest), ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(packed)).To(ContainElement("Deployment/team-a/web-cache"))
	g.Expect(packed.Digest).To(Equal(dir.Digest))
}

// TestRenderChartValuesInvalid: values the schemas refuse, or that are not a
// JSON object, fail with ValuesInvalid naming the field.
func TestRenderChartValuesInvalid(t *testing.T) {
	archive := chartArchive(t, "podinfo", chartFiles(t, "podinfo"))
	for _, tc := range []struct{ name, values, want string }{
		{"wrong type", `{"replicaCount": "three"}`, "/replicaCount"},
		{"through a local $ref", `{"service": {"port": 70000}}`, "/service/port"},
		{"subchart schema", `{"cache": {"maxMemory": "lots"}}`, "cache:\n- at '/maxMemory'"},
		{"not an object", `[1, 2]`, "values must be a JSON object"},
		{"not JSON", `{"replicaCount": `, "values are not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := RenderChart(context.Background(), chartRequest(archive, tc.values))
			g.Expect(Reason(err)).To(Equal(ReasonValuesInvalid), "error: %v", err)
			g.Expect(err.Error()).To(HavePrefix("chart " + testChartRef + ": "))
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestRenderChartTemplateErrors: template errors keep Helm's message, which
// names the template file and line, after the chart; documents that are not
// objects are InvalidObject naming the template file.
func TestRenderChartTemplateErrors(t *testing.T) {
	base := chartFiles(t, "broken")
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	for _, tc := range []struct {
		name, template, reason string
		want                   []string
	}{
		{"execution", "", ReasonRenderFailed,
			[]string{"template: broken/templates/configmap.yaml:6:", "nil pointer evaluating interface {}.field"}},
		{"parse", "a: 1\nb: 2\n{{ if }}\n", ReasonRenderFailed,
			[]string{"broken/templates/configmap.yaml:3", "missing value for if"}},
		{"required", cm + "data:\n  a: {{ required \"a is required\" .Values.a }}\n", ReasonRenderFailed,
			[]string{"broken/templates/configmap.yaml:6:", "a is required"}},
		{"fail", "{{ fail \"refusing\" }}", ReasonRenderFailed,
			[]string{"broken/templates/configmap.yaml:1:", "refusing"}},
		{"not an object", cm + "---\njust text\n", ReasonInvalidObject,
			[]string{"broken/templates/configmap.yaml (document 2) is not a Kubernetes object"}},
		{"no kind", "apiVersion: v1\nmetadata:\n  name: x\n", ReasonInvalidObject,
			[]string{"object broken/templates/configmap.yaml (document 1) has no kind"}},
		{"not YAML", "a: [1\n", ReasonInvalidObject,
			[]string{"broken/templates/configmap.yaml (document 1) is not valid YAML"}},
		{"duplicate", cm + "---\n" + cm, ReasonInvalidObject,
			[]string{"object broken/templates/configmap.yaml (document 2) duplicates broken/templates/configmap.yaml (document 1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			files := base
			if tc.template != "" {
				files = withFiles(base, map[string]string{"templates/configmap.yaml": tc.template})
			}
			_, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "broken", files), ""))
			g.Expect(Reason(err)).To(Equal(tc.reason), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring("chart " + testChartRef + ": "))
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// TestRenderChartInstallable: what `helm install` refuses before rendering
// is ChartInvalid.
func TestRenderChartInstallable(t *testing.T) {
	files := chartFiles(t, "podinfo")
	chartYAML := files["Chart.yaml"]
	_, withoutCache := subFiles(files, "charts/cache")
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"library chart", withFiles(files, map[string]string{"Chart.yaml": strings.Replace(chartYAML, "type: application", "type: library", 1)}),
			"podinfo is a library chart"},
		{"missing dependency", withoutCache, `dependencies ["cache"] of Chart.yaml are missing from charts/`},
		{"kubeVersion", withFiles(files, map[string]string{"Chart.yaml": strings.Replace(chartYAML, ">=1.25.0-0", "<1.30.0-0", 1)}),
			"chart podinfo 6.7.0 requires kubeVersion <1.30.0-0, which excludes Kubernetes " + DefaultKubeVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", tc.files), ""))
			g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestRenderChartLimits: MaxObjects and MaxBytes bound the output, hooks
// included (podinfo renders 9 objects and 1 hook).
func TestRenderChartLimits(t *testing.T) {
	g := NewWithT(t)
	archive := chartArchive(t, "podinfo", chartFiles(t, "podinfo"))

	req := chartRequest(archive, "")
	req.Limits.MaxObjects = 9
	_, err := RenderChart(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
	g.Expect(err.Error()).To(ContainSubstring("more than MaxObjects (9)"))
	req.Limits.MaxObjects = 10
	_, err = RenderChart(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())

	req = chartRequest(archive, "")
	req.Limits.MaxBytes = 1000
	_, err = RenderChart(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
	g.Expect(err.Error()).To(ContainSubstring("exceed MaxBytes (1000 bytes)"))
}

// TestRenderChartTimeout: a template that runs far past the deadline
// returns RenderTimeout at the deadline.
func TestRenderChartTimeout(t *testing.T) {
	g := NewWithT(t)
	files := withFiles(chartFiles(t, "broken"), map[string]string{
		// About 8e7 iterations: several seconds, and little memory.
		"templates/configmap.yaml": "{{ range until 9000 }}{{ range until 9000 }}{{ end }}{{ end }}",
	})
	req := chartRequest(chartArchive(t, "broken", files), "")
	req.Limits.Timeout = time.Second

	start := time.Now()
	_, err := RenderChart(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("timeout 1s"))
	g.Expect(err.Error()).To(ContainSubstring(testChartRef))
	g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = RenderChart(ctx, req)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(err).To(MatchError(context.Canceled))
}

// TestRenderChartAbandonedRendersAreBounded: a render abandoned at its
// deadline keeps its slot until its templates end, and a render that finds
// no free slot within its deadline times out; it waits for one otherwise.
func TestRenderChartAbandonedRendersAreBounded(t *testing.T) {
	g := NewWithT(t)
	env := chartEnv{caps: defaultArchiveLimits, slots: make(chan struct{}, 1)}
	files := chartFiles(t, "broken")
	slow := chartRequest(chartArchive(t, "broken", withFiles(files, map[string]string{
		"templates/configmap.yaml": "{{ range until 4000 }}{{ range until 4000 }}{{ end }}{{ end }}", // about 1s
	})), "")
	slow.Limits.Timeout = 100 * time.Millisecond
	quick := chartRequest(chartArchive(t, "broken", withFiles(files, map[string]string{
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quick\n",
	})), "")
	quick.Limits.Timeout = 300 * time.Millisecond

	_, err := renderChart(context.Background(), slow, env)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	_, err = renderChart(context.Background(), quick, env)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("while waiting for a chart render slot"))

	quick.Limits.Timeout = time.Minute
	res, err := renderChart(context.Background(), quick, env)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(res)).To(Equal([]string{"ConfigMap/team-a/quick"}))
}

// TestRenderChartDeprecated: a deprecated chart renders with a warning.
func TestRenderChartDeprecated(t *testing.T) {
	g := NewWithT(t)
	files := chartFiles(t, "podinfo")
	files["Chart.yaml"] += "deprecated: true\n"
	res, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", files), ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Warnings).To(Equal([]string{"chart podinfo 6.7.0 is deprecated"}))
}

// TestChartKubeVersionMatchesClientGo: the Kubernetes version charts see is
// the one of the client-go in go.mod, whose API versions they see too.
func TestChartKubeVersionMatchesClientGo(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile("../go.mod")
	g.Expect(err).NotTo(HaveOccurred())
	mod, err := modfile.ParseLax("go.mod", data, nil)
	g.Expect(err).NotTo(HaveOccurred())
	var clientGo string
	for _, r := range mod.Require {
		if r.Mod.Path == "k8s.io/client-go" {
			clientGo = r.Mod.Version
		}
	}
	g.Expect(clientGo).To(HavePrefix("v0."))
	minor := strings.Split(strings.TrimPrefix(clientGo, "v0."), ".")[0]
	g.Expect(DefaultKubeVersion).To(Equal("v1."+minor+".0"), "client-go %s", clientGo)
	caps, err := (*Capabilities)(nil).helm()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(caps.KubeVersion.Minor).To(Equal(minor))
}

// nested returns a field of the object of that kind and name.
func nested(res *Result, kind, name string, fields ...string) any {
	for _, o := range res.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			v, _, _ := unstructured.NestedFieldNoCopy(o.Object, fields...)
			return v
		}
	}
	return nil
}

package main

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/render"
)

// writeMonitoredChart writes a chart that renders a ServiceMonitor only where
// monitoring.coreos.com/v1 ServiceMonitor is served, and the Kubernetes version it
// saw; kubeVersion is its Chart.yaml constraint.
func writeMonitoredChart(t *testing.T, kubeVersion string) string {
	t.Helper()
	dir := writeChartDir(t, "monitored", "0.1.0")
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: monitored\nversion: 0.1.0\nkubeVersion: \"" + kubeVersion + "\"\n",
		"templates/configmap.yml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n" +
			"data:\n  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}\n",
		"templates/servicemonitor.yaml": `{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .Release.Name }}
{{- end }}
`,
	}
	for p, content := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRenderCapabilityFlags: `cairn render` gives charts `helm template`'s
// capabilities, or those of --kube-version and --api-versions (repeatable or a
// comma list, added to Helm's defaults); the chart's kubeVersion is checked against
// the version; a version that does not parse is a clear error.
func TestRenderCapabilityFlags(t *testing.T) {
	host := startRegistry(t, false)
	res := execCairnWithStdin(t, "", "push", "chart", writeMonitoredChart(t, ">=1.30.0-0"), "--to", "oci://"+host+"/charts/monitored", "--plain-http")
	if res.err != nil {
		t.Fatalf("push: %v", res.err)
	}
	dir := writeRepoDir(t, map[string]string{
		"platform.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata: {name: cluster}\nspec:\n  namespaces: {allow: [\"team-*\"]}\n" +
			"---\napiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata: {name: charts}\nspec: {hostname: \"" + host + "\", plainHTTP: true}\n",
		"web.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata: {name: web, namespace: team-a}\n" +
			"spec:\n  module: {chart: {url: \"oci://" + host + "/charts/monitored\", version: 0.1.0}}\n",
	})
	kinds := func(out string) map[string]string {
		g := NewWithT(t)
		got := map[string]string{}
		for _, d := range yamlDocuments(g, out) {
			data, _ := d["data"].(map[string]any)
			version, _ := data["kubeVersion"].(string)
			got[d["kind"].(string)] = version
		}
		return got
	}
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
		code int
		err  string
	}{
		{"helm template's defaults", nil, map[string]string{"ConfigMap": render.DefaultKubeVersion}, 0, ""},
		{"a version and an API", []string{"--kube-version", "1.31", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"},
			map[string]string{"ConfigMap": "v1.31", "ServiceMonitor": ""}, 0, ""}, // as helm template parses it
		{"APIs repeated and listed", []string{"-a", "example.com/v1,example.com/v1/Thing", "-a", "monitoring.coreos.com/v1/ServiceMonitor"},
			map[string]string{"ConfigMap": render.DefaultKubeVersion, "ServiceMonitor": ""}, 0, ""},
		{"a version the chart excludes", []string{"--kube-version", "v1.29.3"}, nil, 2,
			"chart monitored 0.1.0 requires kubeVersion >=1.30.0-0, which excludes Kubernetes v1.29.3"},
		{"a version that does not parse", []string{"--kube-version", "banana"}, nil, 1, `invalid --kube-version "banana"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := execCairn(t, append([]string{"render", "--repo", dir, "--cache-dir", t.TempDir()}, tc.args...)...)
			g.Expect(r.code).To(Equal(tc.code), "%v\n%s", r.err, r.stderr)
			if tc.err != "" {
				g.Expect(r.stderr + errText(r.err)).To(ContainSubstring(tc.err))
				return
			}
			g.Expect(kinds(r.stdout)).To(Equal(tc.want))
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRenderTimoniKubeVersion: `cairn render` gives a Timoni module's kubeVersion tag
// the --kube-version (v1.37.0 without it) and its moduleVersion tag 0.0.0-devel for a
// directory; the instance's values win over the module's defaults.
func TestRenderTimoniKubeVersion(t *testing.T) {
	files := map[string]string{
		"platform.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: Platform\nmetadata: {name: cluster}\nspec:\n  namespaces: {allow: [\"team-*\"]}\n",
		"web.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata: {name: web, namespace: team-a}\n" +
			"spec:\n  module: {timoni: {path: ./echo}}\n  values: {replicas: 4}\n",
	}
	err := filepath.WalkDir("../../examples/timoni/echo", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel("../../examples/timoni", p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeRepoDir(t, files)
	for _, tc := range []struct {
		args      []string
		kubeMinor string
	}{{nil, "37"}, {[]string{"--kube-version", "1.31"}, "31"}} {
		g := NewWithT(t)
		r := execCairn(t, append([]string{"render", "--repo", dir, "--cache-dir", t.TempDir()}, tc.args...)...)
		g.Expect(r.code).To(Equal(0), "%v\n%s", r.err, r.stderr)
		docs := map[string]map[string]any{}
		for _, d := range yamlDocuments(g, r.stdout) {
			docs[d["kind"].(string)] = d
		}
		g.Expect(docs["ConfigMap"]["data"]).To(HaveKeyWithValue("kubeMinor", tc.kubeMinor))
		g.Expect(docs["ConfigMap"]["data"]).To(HaveKeyWithValue("moduleVersion", "0.0.0-devel"))
		g.Expect(docs["Deployment"]["spec"]).To(HaveKeyWithValue("replicas", BeNumerically("==", 4)))
	}
}

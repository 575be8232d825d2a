package render

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// monitoredChart is a chart that renders a ServiceMonitor only where its API
// is served, and reports the Kubernetes version it saw.
func monitoredChart(t *testing.T, kubeVersion string) []byte {
	t.Helper()
	chartYAML := "apiVersion: v2\nname: monitored\nversion: 0.1.0\n"
	if kubeVersion != "" {
		chartYAML += "kubeVersion: " + kubeVersion + "\n"
	}
	return chartArchive(t, "monitored", map[string]string{
		"Chart.yaml": chartYAML,
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-caps
data:
  version: {{ .Capabilities.KubeVersion.Version | quote }}
  major: {{ .Capabilities.KubeVersion.Major | quote }}
  minor: {{ .Capabilities.KubeVersion.Minor | quote }}
  apps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
`,
		"templates/servicemonitor.yaml": `{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .Release.Name }}
spec:
  endpoints: [{port: http}]
{{- end }}
`,
	})
}

// TestRenderChartCapabilities: a chart sees the Kubernetes version and the API
// versions of its request, Helm's defaults (with DefaultKubeVersion) where the
// request leaves them empty; a given API version list replaces the defaults, as
// discovery does for `helm install`.
func TestRenderChartCapabilities(t *testing.T) {
	monitor := "monitoring.coreos.com/v1/ServiceMonitor"
	for _, tc := range []struct {
		name    string
		caps    *Capabilities
		data    map[string]any
		monitor bool
	}{
		{"defaults", nil, map[string]any{"version": DefaultKubeVersion, "major": "1", "minor": "37", "apps": "true"}, false},
		{"empty", &Capabilities{}, map[string]any{"version": DefaultKubeVersion, "major": "1", "minor": "37", "apps": "true"}, false},
		{"defaults and the monitoring API", &Capabilities{APIVersions: append(DefaultAPIVersions(), "monitoring.coreos.com/v1", monitor)},
			map[string]any{"version": DefaultKubeVersion, "major": "1", "minor": "37", "apps": "true"}, true},
		{"a cluster's own", &Capabilities{KubeVersion: "v1.30.5-gke.1014001", APIVersions: []string{"v1", "v1/ConfigMap", monitor}},
			map[string]any{"version": "v1.30.5-gke.1014001", "major": "1", "minor": "30", "apps": "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := chartRequest(monitoredChart(t, ""), "")
			req.Capabilities = tc.caps
			res, err := RenderChart(context.Background(), req)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nested(res, "ConfigMap", "web-caps", "data")).To(Equal(tc.data))
			if tc.monitor {
				g.Expect(objectIDs(res)).To(ContainElement("ServiceMonitor/team-a/web"))
			} else {
				g.Expect(objectIDs(res)).To(Equal([]string{"ConfigMap/team-a/web-caps"}))
			}
		})
	}
}

// TestRenderChartKubeVersionConstraint: Chart.yaml's kubeVersion is checked
// against the request's Kubernetes version as Helm checks it (a pre-release
// version needs a constraint that admits one); a refusal names the chart, its
// constraint and the version. An unparsable version is refused too.
func TestRenderChartKubeVersionConstraint(t *testing.T) {
	for _, tc := range []struct {
		name, constraint, version string
		reason, want              string
	}{
		{"satisfied", `">=1.30.0"`, "v1.37.2", "", ""},
		{"default version", `">=1.37.0-0"`, "", "", ""},
		{"in the future", `">=99.0.0"`, "v1.37.2", ReasonChartInvalid,
			"chart " + testChartRef + ": chart monitored 0.1.0 requires kubeVersion >=99.0.0, which excludes Kubernetes v1.37.2"},
		{"pre-release excluded", `">=1.30.0"`, "v1.31.2-gke.1", ReasonChartInvalid,
			"requires kubeVersion >=1.30.0, which excludes Kubernetes v1.31.2-gke.1"},
		{"pre-release admitted", `">=1.30.0-0"`, "v1.31.2-gke.1", "", ""},
		{"default excluded", `"<1.30.0"`, "", ReasonChartInvalid, "excludes Kubernetes " + DefaultKubeVersion},
		{"invalid version", "", "banana", ReasonRenderFailed, `invalid Kubernetes version "banana"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			req := chartRequest(monitoredChart(t, tc.constraint), "")
			req.Capabilities = &Capabilities{KubeVersion: tc.version}
			_, err := RenderChart(context.Background(), req)
			if tc.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(Reason(err)).To(Equal(tc.reason), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestWorkerPassesCapabilities: the capabilities reach a chart rendered in a
// worker process (the worker protocol carries them).
func TestWorkerPassesCapabilities(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	req := chartRequest(monitoredChart(t, `">=1.30.0"`), "")
	req.Capabilities = &Capabilities{KubeVersion: "v1.31.4", APIVersions: []string{"v1", "monitoring.coreos.com/v1/ServiceMonitor"}}
	got, err := r.RenderChart(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objectIDs(got)).To(ContainElement("ServiceMonitor/team-a/web"))
	g.Expect(nested(got, "ConfigMap", "web-caps", "data", "version")).To(Equal("v1.31.4"))

	req.Capabilities.KubeVersion = "v1.29.0"
	_, err = r.RenderChart(context.Background(), req)
	g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("excludes Kubernetes v1.29.0"))
}

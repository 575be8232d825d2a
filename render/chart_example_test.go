package render_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"slices"

	"cairn.dev/cairn/render"
)

func ExampleRenderChart() {
	archive := packChart("hello", map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: hello\nversion: 1.0.0\n",
		"values.yaml": "message: hello\nreplicas: 1\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  message: {{ .Values.message | quote }}
`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
`,
	})
	res, err := render.RenderChart(context.Background(), render.ChartRequest{
		Name:      "web",
		Namespace: "team-a",
		Chart:     "oci://registry.example.com/charts/hello@sha256:0f1e",
		Archive:   archive,
		Digest:    "sha256:0f1e",
		Values:    []byte(`{"replicas": 2}`),
	})
	if err != nil {
		fmt.Println(render.Reason(err), err)
		return
	}
	for _, o := range res.Objects {
		fmt.Printf("%s %s/%s\n", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	// Output:
	// ConfigMap team-a/web
	// Deployment team-a/web
}

// packChart writes a chart archive as `helm package` does: the files under
// the chart's directory.
func packChart(name string, files map[string]string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		data := files[path]
		_ = tw.WriteHeader(&tar.Header{Name: name + "/" + path, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))})
		_, _ = tw.Write([]byte(data))
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

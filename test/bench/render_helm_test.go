package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
)

// B3, Helm half: chart instances rendered per second by render.RenderChart
// in-process (the chart archive in memory) against `helm template` of the
// same archive with the same values, one process per instance, as a CI loop
// would run it. Two charts: examples/charts/hello (3 objects) and a
// synthetic chart of 50 templates with range loops (100 objects), to show
// how both scale with the chart's size. Every instance has its own release
// name and values, so no cache could help (RenderChart has none).

const (
	helloChartDir = "../../examples/charts/hello"
	helmNamespace = "team-a"
	// helmKubeVersion is the Kubernetes version RenderChart gives charts
	// (render's chartKubeVersion); `helm template` gets the same.
	helmKubeVersion = "v1.37.0"
	bigTemplates    = 50
)

// helmCase is one chart of the benchmark.
type helmCase struct {
	label   string // the chart in the table
	archive []byte // .tgz, as pulled
	n, nCLI int    // renders by RenderChart, by `helm template`
	release func(i int) string
	values  func(i int) []byte
	// check is cairn's cheap check of instance i, inside the timing: that
	// the values took effect.
	check func(objs []*unstructured.Unstructured, i int) error
}

func TestB3HelmRenderThroughput(t *testing.T) {
	helm := tool(t, "helm")
	workers := max(2, runtime.GOMAXPROCS(0))
	reps := pick(3, 1)
	cases := []helmCase{helloCase(t), bigCase(t)}

	tb := newTable("B3 render, Helm: render.RenderChart in-process vs `helm template`",
		"chart", "mode", "renders", "wall time", "wall time ÷ renders", "renders/s", "vs helm template (same concurrency)")
	for _, c := range cases {
		// Warm-up, untimed.
		if err := c.renderChecked(0); err != nil {
			t.Fatal(err)
		}
		var seqs, pars []time.Duration
		for range reps {
			seqs = append(seqs, timeIt(t, c.n, c.renderChecked).total())
			pars = append(pars, parallel(t, c.n, workers, func(_, i int) error { return c.renderChecked(i) }))
		}
		seq, par := samples(seqs).median(), samples(pars).median()
		seqRate, parRate := rate(c.n, seq), rate(c.n, par)

		cairnSeq := "cairn `render.RenderChart`, sequential"
		cairnPar := fmt.Sprintf("cairn `render.RenderChart`, %d goroutines", workers)
		if helm == "" {
			t.Logf("%s: helm not built (hack/bench-tools.sh): comparing with helm template skipped", c.label)
			tb.add(c.label, cairnSeq, c.n, ms(seq), ms(seq/time.Duration(c.n)), fmt.Sprintf("%.0f", seqRate), "n/a")
			tb.add(c.label, cairnPar, c.n, ms(par), ms(par/time.Duration(c.n)), fmt.Sprintf("%.0f", parRate), "n/a")
			continue
		}
		h := newHelmTemplater(t, helm, c.archive, workers)
		if _, err := h.template(0, c.release(0), c.values(0)); err != nil { // warm-up, untimed
			t.Fatal(err)
		}
		seqOuts, parOuts := make([][]byte, c.nCLI), make([][]byte, c.nCLI)
		cliSeq := timeIt(t, c.nCLI, func(i int) (err error) {
			seqOuts[i], err = h.template(0, c.release(i), c.values(i))
			return err
		}).total()
		cliPar := parallel(t, c.nCLI, workers, func(w, i int) (err error) {
			parOuts[i], err = h.template(w, c.release(i), c.values(i))
			return err
		})
		// Every output of helm, sequential and parallel, against cairn's
		// render of the same instance.
		for i := range c.nCLI {
			want := c.render(t, i)
			for _, out := range [][]byte{seqOuts[i], parOuts[i]} {
				if err := compareHelm(t, want, out); err != nil {
					t.Fatalf("%s, instance %d: helm template and RenderChart differ: %v", c.label, i, err)
				}
			}
		}
		cliSeqRate, cliParRate := rate(c.nCLI, cliSeq), rate(c.nCLI, cliPar)
		tb.add(c.label, cairnSeq, c.n, ms(seq), ms(seq/time.Duration(c.n)), fmt.Sprintf("%.0f", seqRate), ratio(seqRate, cliSeqRate))
		tb.add(c.label, cairnPar, c.n, ms(par), ms(par/time.Duration(c.n)), fmt.Sprintf("%.0f", parRate), ratio(parRate, cliParRate))
		tb.add(c.label, "`helm template`, sequential", c.nCLI, ms(cliSeq), ms(cliSeq/time.Duration(c.nCLI)), fmt.Sprintf("%.1f", cliSeqRate), "1×")
		tb.add(c.label, fmt.Sprintf("`helm template`, %d processes at a time", workers), c.nCLI, ms(cliPar), ms(cliPar/time.Duration(c.nCLI)), fmt.Sprintf("%.1f", cliParRate), "1×")
	}
	tb.note("hello = examples/charts/hello packaged with chartutil.Save (%s; ConfigMap, Deployment, Service; values.schema.json checked); big = a synthetic chart of %d templates, each a ConfigMap ranging over 20 entries and 4 settings and a Service ranging over 4 ports, with a labels helper (%s)",
		byteSize(int64(len(cases[0].archive))), bigTemplates, byteSize(int64(len(cases[1].archive))))
	tb.note("each render has its own release name and values (greeting and replicas; entries, settings and ports); RenderChart gets the archive bytes, the values JSON, the release name and namespace %s", helmNamespace)
	runs := "one run"
	if reps > 1 {
		runs = fmt.Sprintf("the median of %d runs", reps)
	}
	tb.note("cairn times: %s, after one untimed render; RenderChart unpacks, loads, checks and renders the archive every time (it has no cache)", runs)
	if helm != "" {
		tb.note("helm %s (built by hack/bench-tools.sh), one process per render, as a CI loop runs it: `helm template RELEASE chart.tgz -n %s -f values.yaml --kube-version %s` (values written to the file inside the timing), in a home of its own; timed once per concurrency after one untimed run", toolVersion(t, helm), helmNamespace, helmKubeVersion)
		tb.note("outputs agree (asserted): for every `helm template` run, sequential and parallel, its documents are the objects RenderChart renders for the same instance (same kind/name set; each object equal, ConfigMap data included, once helm's objects get the release namespace that RenderChart gives namespaced objects)")
	} else {
		tb.note("helm was not built (hack/bench-tools.sh): no `helm template` baseline in this run; RenderChart's outputs were checked against the values only")
	}
	tb.note("GOMAXPROCS %d", runtime.GOMAXPROCS(0))
	tb.report(t, "B3-helm")
}

// render renders instance i with RenderChart.
func (c *helmCase) render(t testing.TB, i int) []*unstructured.Unstructured {
	t.Helper()
	objs, err := c.renderObjects(i)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func (c *helmCase) renderObjects(i int) ([]*unstructured.Unstructured, error) {
	res, err := render.RenderChart(context.Background(), render.ChartRequest{
		Name: c.release(i), Namespace: helmNamespace, Chart: c.label, Archive: c.archive,
		Digest: "sha256:b3", Values: c.values(i),
	})
	if err != nil {
		return nil, err
	}
	return res.Objects, nil
}

// renderChecked renders instance i and checks that its values took effect.
func (c *helmCase) renderChecked(i int) error {
	objs, err := c.renderObjects(i)
	if err != nil {
		return err
	}
	return c.check(objs, i)
}

// helloCase is examples/charts/hello, packaged.
func helloCase(t *testing.T) helmCase {
	ch, err := loader.LoadDir(helloChartDir)
	if err != nil {
		t.Fatal(err)
	}
	release := func(i int) string { return fmt.Sprintf("hello-%d", i) }
	greeting := func(i int) string { return fmt.Sprintf("hello from instance %d", i) }
	return helmCase{
		label:   "hello",
		archive: packageChart(t, ch),
		n:       pick(1000, 5),
		nCLI:    pick(100, 2),
		release: release,
		values: func(i int) []byte {
			b, _ := json.Marshal(map[string]any{"greeting": greeting(i), "replicas": i % 5})
			return b
		},
		check: func(objs []*unstructured.Unstructured, i int) error {
			if len(objs) != 3 {
				return fmt.Errorf("hello instance %d: rendered %d objects, want 3", i, len(objs))
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "ConfigMap":
					data, _, _ := unstructured.NestedStringMap(o.Object, "data")
					if want := map[string]string{"greeting": greeting(i), "namespace": helmNamespace}; !maps.Equal(data, want) {
						return fmt.Errorf("hello instance %d: ConfigMap data %v, want %v", i, data, want)
					}
				case "Deployment":
					if r, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas"); r != int64(i%5) {
						return fmt.Errorf("hello instance %d: Deployment replicas %d, want %d", i, r, i%5)
					}
				}
			}
			return nil
		},
	}
}

// bigCase is a synthetic chart of bigTemplates templates with range loops:
// 2 objects per template.
func bigCase(t *testing.T) helmCase {
	ch := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion: chart.APIVersionV2, Name: "big", Version: "1.0.0", Type: "application",
			Description: "B3 synthetic chart: templates with range loops",
		},
		// chartutil.Save writes values.yaml from Raw, not from Values.
		Raw: []*chart.File{{Name: chartutil.ValuesfileName, Data: []byte("suffix: default\nsettings:\n  mode: bench\n")}},
		Templates: []*chart.File{{
			Name: "templates/_helpers.tpl",
			Data: []byte(`{{- define "big.fullname" -}}
{{ .Release.Name }}-{{ .Chart.Name }}
{{- end -}}
{{- define "big.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.Version | quote }}
{{- end -}}
`),
		}},
	}
	for p := range bigTemplates {
		ch.Templates = append(ch.Templates, &chart.File{
			Name: fmt.Sprintf("templates/part-%02d.yaml", p),
			Data: fmt.Appendf(nil, `{{- $part := "%02d" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "big.fullname" . }}-{{ $part }}
  labels:
    {{- include "big.labels" . | nindent 4 }}
    part: {{ $part | quote }}
data:
  {{- range $i, $e := .Values.entries }}
  {{ $e.key }}: {{ printf "%%s/%%s/%%d/%%s" $e.value $part $i $.Values.suffix | quote }}
  {{- end }}
  {{- range $k, $v := .Values.settings }}
  setting-{{ $k }}: {{ $v | quote }}
  {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "big.fullname" . }}-{{ $part }}
  labels:
    {{- include "big.labels" . | nindent 4 }}
spec:
  selector:
    {{- include "big.labels" . | nindent 4 }}
    part: {{ $part | quote }}
  ports:
    {{- range .Values.ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .target }}
    {{- end }}
`, p),
		})
	}
	release := func(i int) string { return fmt.Sprintf("big-%d", i) }
	suffix := func(i int) string { return fmt.Sprintf("instance-%d", i) }
	return helmCase{
		label:   fmt.Sprintf("big (%d templates)", bigTemplates),
		archive: packageChart(t, ch),
		n:       pick(200, 3),
		nCLI:    pick(50, 2),
		release: release,
		values: func(i int) []byte {
			var entries, ports []map[string]any
			for e := range 20 {
				entries = append(entries, map[string]any{"key": fmt.Sprintf("key-%02d", e), "value": fmt.Sprintf("value-%d-%d", i, e)})
			}
			for p := range 4 {
				ports = append(ports, map[string]any{"name": fmt.Sprintf("p%d", p), "port": 8000 + 10*p + i%10, "target": 9000 + p})
			}
			b, _ := json.Marshal(map[string]any{
				"suffix":   suffix(i),
				"entries":  entries,
				"ports":    ports,
				"settings": map[string]any{"index": fmt.Sprint(i), "tier": "bench", "zone": fmt.Sprintf("z%d", i%3)},
			})
			return b
		},
		check: func(objs []*unstructured.Unstructured, i int) error {
			if len(objs) != 2*bigTemplates {
				return fmt.Errorf("big instance %d: rendered %d objects, want %d", i, len(objs), 2*bigTemplates)
			}
			for _, o := range objs {
				if o.GetKind() != "ConfigMap" {
					continue
				}
				data, _, _ := unstructured.NestedStringMap(o.Object, "data")
				// 20 entries + 4 settings (the chart's "mode" and 3 of the instance's).
				if len(data) != 24 || !strings.HasSuffix(data["key-19"], "/19/"+suffix(i)) || data["setting-index"] != fmt.Sprint(i) {
					return fmt.Errorf("big instance %d: ConfigMap %s has data %v", i, o.GetName(), data)
				}
			}
			return nil
		},
	}
}

// packageChart packages ch with chartutil.Save, as `helm package` does, and
// returns the archive.
func packageChart(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	tgz, err := sign.PackageChart(ch)
	if err != nil {
		t.Fatal(err)
	}
	return tgz
}

// helmTemplater runs `helm template` of one chart archive, with a values
// file per worker, in a home of its own (no user configuration or cache
// read or written).
type helmTemplater struct {
	helm, archive string
	dir           string
	env           []string
}

func newHelmTemplater(t *testing.T, helm string, archive []byte, workers int) *helmTemplater {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "chart.tgz")
	if err := os.WriteFile(path, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home+"/.config", "XDG_CACHE_HOME="+home+"/.cache",
		"XDG_DATA_HOME="+home+"/.local/share", "HELM_CONFIG_HOME="+home+"/helm/config", "HELM_CACHE_HOME="+home+"/helm/cache",
		"HELM_DATA_HOME="+home+"/helm/data", "KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	return &helmTemplater{helm: helm, archive: path, dir: dir, env: env}
}

// template writes the values into worker's values file (JSON is YAML) and
// runs helm template with it.
func (h *helmTemplater) template(worker int, release string, values []byte) ([]byte, error) {
	valuesFile := filepath.Join(h.dir, fmt.Sprintf("values-%d.yaml", worker))
	if err := os.WriteFile(valuesFile, values, 0o644); err != nil {
		return nil, err
	}
	args := []string{"template", release, h.archive, "-n", helmNamespace, "-f", valuesFile, "--kube-version", helmKubeVersion}
	cmd := exec.Command(h.helm, args...)
	cmd.Env = h.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// compareHelm checks that the documents helm template printed are cairn's
// objects: the same kind/namespace/name set, then each object equal, after
// giving helm's objects the release namespace where they have none (as
// RenderChart does; every kind of these charts is namespaced).
func compareHelm(t *testing.T, cairn []*unstructured.Unstructured, out []byte) error {
	t.Helper()
	want := byIdentity(t, cairn)
	got, err := helmObjects(out)
	if err != nil {
		return err
	}
	gotIDs, wantIDs := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))
	if !slices.Equal(gotIDs, wantIDs) {
		return fmt.Errorf("helm printed %d objects %v, RenderChart rendered %d %v", len(gotIDs), gotIDs, len(wantIDs), wantIDs)
	}
	for _, id := range gotIDs {
		if ok, err := Equal(want[id]).Match(got[id]); err != nil || !ok {
			return fmt.Errorf("%s: %s", id, Equal(want[id]).FailureMessage(got[id]))
		}
	}
	return nil
}

// helmObjects parses helm template's output (YAML documents with "# Source"
// comments) into objects indexed by kind/namespace/name.
func helmObjects(out []byte) (map[string]any, error) {
	m := map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("failed to parse helm template's output: %w", err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetNamespace() == "" {
			u.SetNamespace(helmNamespace)
		}
		id := identity(u)
		if _, dup := m[id]; dup {
			return nil, fmt.Errorf("helm printed %s twice", id)
		}
		m[id] = u.Object
	}
}

package render

import (
	"context"
	"testing"
	"time"
)

// FuzzRenderChartArchive renders arbitrary bytes as a chart archive: it never
// panics, and either renders or fails with a typed error that names the
// chart.
func FuzzRenderChartArchive(f *testing.F) {
	files := chartFiles(f, "podinfo")
	podinfo := chartArchive(f, "podinfo", files)
	cache, rest := subFiles(files, "charts/cache")
	rest["charts/cache-0.1.0.tgz"] = string(chartArchive(f, "cache", cache))
	for _, seed := range [][]byte{
		podinfo, podinfo[:len(podinfo)/2], chartArchive(f, "podinfo", rest), chartArchive(f, "broken", chartFiles(f, "broken")),
		tgz(f), tgz(f, regularEntry("x/Chart.yaml", "name: x")), nil, []byte("\x1f\x8b\x08"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, archive []byte) {
		req := chartRequest(archive, "")
		req.Limits.Timeout = 10 * time.Second
		res, err := RenderChart(context.Background(), req)
		if err != nil {
			switch Reason(err) {
			case ReasonChartInvalid, ReasonValuesInvalid, ReasonRenderFailed, ReasonInvalidObject, ReasonLimitExceeded:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			if msg := err.Error(); len(msg) < len(testChartRef) || msg[:6+len(testChartRef)] != "chart "+testChartRef {
				t.Fatalf("error does not name the chart: %v", err)
			}
			return
		}
		if res.Digest == "" || res.ModuleDigest != testChartDigest {
			t.Fatalf("incomplete result %+v", res)
		}
	})
}

package render

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestWorkerRendersCharts: a chart rendered in a worker gives the Result of an
// in-process render; its errors keep their reason and message.
func TestWorkerRendersCharts(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	req := chartRequest(chartArchive(t, "podinfo", chartFiles(t, "podinfo")), "")
	got, err := r.RenderChart(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := RenderChart(context.Background(), req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	bad := chartRequest(chartArchive(t, "podinfo", chartFiles(t, "podinfo")), `{"replicaCount": "three"}`)
	_, gotErr := r.RenderChart(context.Background(), bad)
	_, wantErr := RenderChart(context.Background(), bad)
	g.Expect(wantErr).To(HaveOccurred())
	g.Expect(Reason(gotErr)).To(Equal(Reason(wantErr)))
	g.Expect(gotErr.Error()).To(Equal(wantErr.Error()))
}

// TestWorkerChartKilledAtDeadline: a chart whose templates run past the
// deadline returns RenderTimeout and its worker is killed; a chart whose
// templates explode in memory fails with LimitExceeded.
func TestWorkerChartKilledAtDeadline(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	files := chartFiles(t, "broken")
	slow := chartRequest(chartArchive(t, "broken", withFiles(files, map[string]string{
		"templates/configmap.yaml": "{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}",
	})), "")
	slow.Limits.Timeout = 500 * time.Millisecond
	_, err := r.RenderChart(context.Background(), slow)
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("its worker process was stopped"))
	g.Expect(r.pool.pids()).To(BeEmpty())

	explode := chartRequest(chartArchive(t, "broken", withFiles(files, map[string]string{
		"templates/configmap.yaml": `{{ $s := "0123456789abcdef" }}{{ range until 40 }}{{ $s = print $s $s }}{{ end }}{{ $s }}`,
	})), "")
	explode.Limits.Memory = 128 << 20
	explode.Limits.Timeout = time.Minute
	_, err = r.RenderChart(context.Background(), explode)
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("memory budget (renderMemory) of 128 MiB"))
}

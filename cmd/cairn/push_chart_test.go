package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"

	"cairn.dev/cairn/sign"
)

// TestPushChartRefusesMissingDependencies: as `helm package` does, push chart
// refuses a chart directory, or a packaged chart, whose Chart.yaml names
// dependencies that charts/ does not hold; the error names the chart and each
// missing dependency, and nothing is pushed. With every dependency in
// charts/, the same chart is pushed.
func TestPushChartRefusesMissingDependencies(t *testing.T) {
	g := NewWithT(t)
	host := startRegistry(t, false)
	dir := writeChartDir(t, "umbrella", "1.0.0")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n" +
			"  - {name: cache, version: 1.0.0, condition: cache.enabled}\n" +
			"  - {name: db, version: 2.0.0}\n  - {name: queue, version: 3.0.0}\n",
		"charts/cache/Chart.yaml": "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
	})
	// The packaged chart, as a tool other than helm package could write it.
	ch, err := loader.LoadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	tgz, err := sign.PackageChart(ch)
	g.Expect(err).NotTo(HaveOccurred())
	tgzPath := filepath.Join(t.TempDir(), "umbrella-1.0.0.tgz")
	g.Expect(os.WriteFile(tgzPath, tgz, 0o644)).To(Succeed())

	for _, path := range []string{dir, tgzPath} {
		res := execCairnWithStdin(t, "", "push", "chart", path, "--to", "oci://"+host+"/charts/umbrella", "--plain-http")
		g.Expect(res.err).To(MatchError("chart umbrella (" + path + "): dependencies of Chart.yaml missing from charts/: db, queue (run helm dependency build)"))
		g.Expect(res.stdout).To(BeEmpty())
	}
	tags := func() int {
		resp, err := http.Get("http://" + host + "/v2/charts/umbrella/tags/list")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}
	g.Expect(tags()).To(Equal(http.StatusNotFound), "nothing was pushed")

	writeFiles(t, dir, map[string]string{
		"charts/db/Chart.yaml":    "apiVersion: v2\nname: db\nversion: 2.0.0\n",
		"charts/queue/Chart.yaml": "apiVersion: v2\nname: queue\nversion: 3.0.0\n",
	})
	res := execCairnWithStdin(t, "", "push", "chart", dir, "--to", "oci://"+host+"/charts/umbrella", "--plain-http")
	g.Expect(res.err).NotTo(HaveOccurred())
	g.Expect(res.stdout).To(ContainSubstring("version 1.0.0 (tag 1.0.0)"))
	g.Expect(tags()).To(Equal(http.StatusOK))
}

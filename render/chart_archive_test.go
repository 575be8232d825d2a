package render

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestRenderChartArchiveEntries: entries that could reach outside the chart
// or are not regular files are refused, naming the entry.
func TestRenderChartArchiveEntries(t *testing.T) {
	link := func(name string, typ byte, target string) tarEntry {
		return tarEntry{hdr: tar.Header{Name: name, Typeflag: typ, Linkname: target, Mode: 0o644}}
	}
	for _, tc := range []struct {
		name  string
		entry tarEntry
		want  string
	}{
		{"parent", regularEntry("../evil.yaml", "a: 1"), `has a ".." element in its name`},
		{"parent inside", regularEntry("podinfo/../../evil.yaml", "a: 1"), `has a ".." element in its name`},
		{"parent directory", tarEntry{hdr: tar.Header{Name: "podinfo/../x/", Typeflag: tar.TypeDir, Mode: 0o755}}, `has a ".." element in its name`},
		{"absolute", regularEntry("/etc/evil.yaml", "a: 1"), "has an absolute name"},
		{"drive", regularEntry("C:/evil.yaml", "a: 1"), "has an absolute name"},
		{"backslash", regularEntry(`podinfo\templates\evil.yaml`, "a: 1"), "has a backslash in its name"},
		{"control character", regularEntry("podinfo/templates/a\x7f.yaml", "a: 1"), "has a control character"},
		{"symlink", link("podinfo/templates/link.yaml", tar.TypeSymlink, "/etc/passwd"), "is not a regular file"},
		{"hard link", link("podinfo/templates/hard.yaml", tar.TypeLink, "podinfo/Chart.yaml"), "is not a regular file"},
		{"device", link("podinfo/templates/dev", tar.TypeChar, ""), "is not a regular file"},
		{"fifo", link("podinfo/templates/fifo", tar.TypeFifo, ""), "is not a regular file"},
		{"top level", regularEntry("values.yaml", "a: 1"), "is not inside the chart's directory"},
		{"other directory", regularEntry("other/templates/x.yaml", "a: 1"), `is outside the chart's directory "podinfo"`},
		{"twice", regularEntry("podinfo/templates/service.yaml", "a: 1"), "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			entries := append(chartEntries("podinfo", chartFiles(t, "podinfo")), tc.entry)
			_, err := RenderChart(context.Background(), chartRequest(tgz(t, entries...), ""))
			g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("archive entry %q %s", tc.entry.hdr.Name, tc.want)))
		})
	}
}

// TestRenderChartArchiveEntriesInSubchart: the same rules hold inside a
// subchart archive, whose entries are named with it.
func TestRenderChartArchiveEntriesInSubchart(t *testing.T) {
	g := NewWithT(t)
	cache, rest := subFiles(chartFiles(t, "podinfo"), "charts/cache")
	entries := append(chartEntries("cache", cache), tarEntry{hdr: tar.Header{
		Name: "cache/templates/link.yaml", Typeflag: tar.TypeSymlink, Linkname: "../../../etc/passwd"}})
	rest["charts/cache-0.1.0.tgz"] = string(tgz(t, entries...))

	_, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", rest), ""))
	g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`archive entry "cache/templates/link.yaml" in charts/cache-0.1.0.tgz is not a regular file`))
}

// TestRenderChartNames: chart names with a path in them are refused, for
// subcharts too (CVE-2024-25620), as is a chart without Chart.yaml.
func TestRenderChartNames(t *testing.T) {
	files := chartFiles(t, "podinfo")
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"parent path", map[string]string{"Chart.yaml": strings.Replace(files["Chart.yaml"], "name: podinfo", "name: ../../x", 1)},
			`Chart.yaml: name "../../x" is not a valid chart name`},
		{"slash", map[string]string{"Chart.yaml": strings.Replace(files["Chart.yaml"], "name: podinfo", "name: a/b", 1)},
			`Chart.yaml: name "a/b" is not a valid chart name`},
		{"subchart", map[string]string{"charts/cache/Chart.yaml": "apiVersion: v2\nname: ../cache\nversion: 0.1.0\n"},
			`charts/cache/Chart.yaml: name "../cache" is not a valid chart name`},
		{"backslash", map[string]string{"charts/cache/Chart.yaml": "apiVersion: v2\nname: '..\\cache'\nversion: 0.1.0\n"},
			`charts/cache/Chart.yaml: name "..\\cache" is not a valid chart name`},
		{"no Chart.yaml", map[string]string{"Chart.yaml": ""}, "Chart.yaml is missing"},
		{"stray file in charts", map[string]string{"charts/README.md": "# charts"}, "charts/README.md/Chart.yaml is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := RenderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", withFiles(files, tc.set)), ""))
			g.Expect(Reason(err)).To(Equal(ReasonChartInvalid), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// TestRenderChartArchiveCaps: archives that are, or expand to, more than the
// caps are refused quickly, naming the cap; subchart archives share the
// budget of the chart.
func TestRenderChartArchiveCaps(t *testing.T) {
	files := chartFiles(t, "podinfo")
	zeros := strings.Repeat("\x00", 400<<10)
	small := defaultArchiveLimits
	small.totalBytes, small.entries, small.depth = 1<<20, 30, 1
	many := map[string]string{}
	for i := range 30 {
		many[fmt.Sprintf("files/%02d.txt", i)] = "x"
	}
	cache, rest := subFiles(files, "charts/cache")
	withBigSubchart := withFiles(rest, map[string]string{"charts/cache-0.1.0.tgz": string(chartArchive(t, "cache",
		withFiles(cache, map[string]string{"a.bin": zeros, "b.bin": zeros, "c.bin": zeros})))})
	withNested := withFiles(files, map[string]string{
		"charts/cache/charts/inner/Chart.yaml": "apiVersion: v2\nname: inner\nversion: 0.1.0\n"})

	for _, tc := range []struct {
		name    string
		archive []byte
		limits  archiveLimits
		reason  string
		want    string
	}{
		{"file over 5 MiB", chartArchive(t, "podinfo", withFiles(files, map[string]string{
			"templates/big.yaml": strings.Repeat("\x00", 6<<20)})), defaultArchiveLimits, ReasonLimitExceeded,
			`archive entry "podinfo/templates/big.yaml" is 6291456 bytes, more than the 5242880-byte file cap`},
		{"archive over 10 MiB", randomBytes(t, 10<<20+1), defaultArchiveLimits, ReasonLimitExceeded,
			"archive is 10485761 bytes, more than the 10485760-byte cap"},
		{"total", chartArchive(t, "podinfo", withFiles(files, map[string]string{
			"a.bin": zeros, "b.bin": zeros, "c.bin": zeros})), small, ReasonLimitExceeded,
			"past 1048576 decompressed bytes (the cap)"},
		{"total with a subchart archive", chartArchive(t, "podinfo", withBigSubchart), small, ReasonLimitExceeded,
			"in charts/cache-0.1.0.tgz takes the chart past 1048576 decompressed bytes"},
		{"entries", chartArchive(t, "podinfo", withFiles(files, many)), small, ReasonLimitExceeded,
			"the chart has more than 30 archive entries"},
		{"depth", chartArchive(t, "podinfo", withNested), small, ReasonLimitExceeded,
			"charts/cache/charts/inner/: subcharts are nested more than 1 deep"},
		{"not gzip", []byte("apiVersion: v2\nname: podinfo\n"), defaultArchiveLimits, ReasonChartInvalid,
			"failed to read the archive: gzip: invalid header"},
		{"empty", tgz(t), defaultArchiveLimits, ReasonChartInvalid, "the archive holds no files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			_, err := renderChart(context.Background(), chartRequest(tc.archive, ""), chartEnv{caps: tc.limits, slots: chartSlots})
			g.Expect(Reason(err)).To(Equal(tc.reason), "error: %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
		})
	}
	// The small caps let the chart itself through.
	_, err := renderChart(context.Background(), chartRequest(chartArchive(t, "podinfo", files), ""), chartEnv{caps: small, slots: chartSlots})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

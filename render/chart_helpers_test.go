package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testChartRef names the test charts in errors.
const testChartRef = "oci://registry.example.com/charts/podinfo@sha256:4c1e0fca1cb4f2a5a6e2b6d0cb6b7e0d8a3f9a0e1d2c3b4a5968778695a4b3c2"

// testChartDigest is the manifest digest of the test charts.
const testChartDigest = "sha256:4c1e0fca1cb4f2a5a6e2b6d0cb6b7e0d8a3f9a0e1d2c3b4a5968778695a4b3c2"

// chartFiles reads the chart directory testdata/charts/<name>: its files by
// slash-separated path inside the chart.
func chartFiles(t testing.TB, name string) map[string]string {
	t.Helper()
	return dirFiles(t, filepath.Join("testdata", "charts", name))
}

// dirFiles reads the files under root by slash-separated path inside it.
func dirFiles(t testing.TB, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("failed to read the chart %s: %v", root, err)
	}
	return files
}

// withFiles returns a copy of files with some files set (or, for "",
// removed).
func withFiles(files map[string]string, set map[string]string) map[string]string {
	out := maps.Clone(files)
	for name, data := range set {
		if data == "" {
			delete(out, name)
			continue
		}
		out[name] = data
	}
	return out
}

// subFiles returns the files under dir/, with dir/ removed from their names,
// and files without them.
func subFiles(files map[string]string, dir string) (sub, rest map[string]string) {
	sub, rest = map[string]string{}, map[string]string{}
	for name, data := range files {
		if n, ok := strings.CutPrefix(name, dir+"/"); ok {
			sub[n] = data
		} else {
			rest[name] = data
		}
	}
	return sub, rest
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	hdr  tar.Header
	data string
}

func regularEntry(name, data string) tarEntry {
	return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data: data}
}

// chartEntries are the entries of a chart archive of files under the
// directory dir, in name order, as `helm package` writes them.
func chartEntries(dir string, files map[string]string) []tarEntry {
	var out []tarEntry
	for _, name := range slices.Sorted(maps.Keys(files)) {
		out = append(out, regularEntry(dir+"/"+name, files[name]))
	}
	return out
}

// chartArchive packs files into a chart archive under the directory dir.
func chartArchive(t testing.TB, dir string, files map[string]string) []byte {
	t.Helper()
	return tgz(t, chartEntries(dir, files)...)
}

// tgz writes a gzipped tar archive of the entries as they are, hostile
// ones included.
func tgz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := e.hdr
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatalf("failed to write the header of %s: %v", hdr.Name, err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatalf("failed to write %s: %v", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("failed to close the archive: %v", err)
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("failed to close the archive: %v", err)
	}
	return buf.Bytes()
}

// chartRequest is the request of the instance team-a/web of a test chart.
func chartRequest(archive []byte, values string) ChartRequest {
	req := ChartRequest{Name: "web", Namespace: "team-a", Chart: testChartRef, Archive: archive, Digest: testChartDigest}
	if values != "" {
		req.Values = []byte(values)
	}
	return req
}

// objectIDs lists the objects of a result as Kind/namespace/name.
func objectIDs(res *Result) []string {
	var ids []string
	for _, o := range res.Objects {
		ids = append(ids, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return ids
}

package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// archiveLimits bound the unpacking of a chart archive and of the subchart
// archives inside it, which share one budget. Helm's loader has its own caps
// (package variables), but applies them to each nested archive afresh: we
// unpack every archive ourselves and give helm only files (loader.LoadFiles).
type archiveLimits struct {
	archiveBytes int64 // the archive as pulled (compressed)
	fileBytes    int64 // one decompressed file
	totalBytes   int64 // all decompressed entries
	entries      int   // all entries
	depth        int   // nesting of subcharts
}

var defaultArchiveLimits = archiveLimits{
	archiveBytes: 10 << 20,
	fileBytes:    5 << 20,
	totalBytes:   100 << 20,
	entries:      5000,
	depth:        10,
}

var (
	drivePath = regexp.MustCompile(`^[a-zA-Z]:`)
	utf8BOM   = []byte{0xEF, 0xBB, 0xBF}
)

// unpacker unpacks a chart archive and its subchart archives within one
// budget.
type unpacker struct {
	limits  archiveLimits
	total   int64
	entries int
}

// loadChart unpacks the archive and loads the chart with its subcharts.
func loadChart(archive []byte, limits archiveLimits) (*chart.Chart, error) {
	u := &unpacker{limits: limits}
	files, err := u.unpack(archive, "")
	if err != nil {
		return nil, err
	}
	return u.load(files, "", 0)
}

// unpack reads a gzipped tar archive of a chart and returns its files with
// the chart's directory removed from their names. where is the archive's
// path inside the outermost one ("" for that one), for errors.
func (u *unpacker) unpack(data []byte, where string) ([]*loader.BufferedFile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, archiveError(where, "", "failed to read the archive: %v", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var files []*loader.BufferedFile
	seen := map[string]bool{}
	top := ""
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !(errors.Is(err, tar.ErrInsecurePath) && hd != nil) {
			return nil, archiveError(where, "", "failed to read the archive: %v", err)
		}
		f, err := u.entry(tr, hd, where, &top)
		if err != nil {
			return nil, err
		}
		if f == nil {
			continue
		}
		if seen[f.Name] {
			return nil, archiveError(where, hd.Name, "appears twice")
		}
		seen[f.Name] = true
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, archiveError(where, "", "the archive holds no files")
	}
	return files, nil
}

// entry checks one entry against the caps and the naming rules and reads
// it; directories and global headers give no file.
func (u *unpacker) entry(tr *tar.Reader, hd *tar.Header, where string, top *string) (*loader.BufferedFile, error) {
	if err := u.charge(hd, where); err != nil {
		return nil, err
	}
	if hd.Typeflag == tar.TypeXGlobalHeader {
		return nil, nil
	}
	dir, name, err := entryName(hd.Name)
	if err != nil {
		return nil, archiveError(where, hd.Name, "%v", err)
	}
	switch hd.Typeflag {
	case tar.TypeDir:
		return nil, nil
	case tar.TypeReg:
	default:
		return nil, archiveError(where, hd.Name, "is not a regular file (tar type %q): links and devices are not allowed", hd.Typeflag)
	}
	if name == "" {
		return nil, archiveError(where, hd.Name, "is not inside the chart's directory")
	}
	if *top == "" {
		*top = dir
	} else if dir != *top {
		return nil, archiveError(where, hd.Name, "is outside the chart's directory %q", *top)
	}
	data, err := io.ReadAll(io.LimitReader(tr, hd.Size))
	if err != nil {
		return nil, archiveError(where, hd.Name, "failed to read: %v", err)
	}
	return &loader.BufferedFile{Name: name, Data: bytes.TrimPrefix(data, utf8BOM)}, nil
}

// charge counts the entry against the caps before it is read (or skipped,
// which decompresses it too).
func (u *unpacker) charge(hd *tar.Header, where string) error {
	u.entries++
	if u.entries > u.limits.entries {
		return archiveLimitError(where, "", "the chart has more than %d archive entries", u.limits.entries)
	}
	if hd.Typeflag == tar.TypeReg && hd.Size > u.limits.fileBytes {
		return archiveLimitError(where, hd.Name, "is %d bytes, more than the %d-byte file cap", hd.Size, u.limits.fileBytes)
	}
	u.total += hd.Size
	if u.total > u.limits.totalBytes {
		return archiveLimitError(where, hd.Name, "takes the chart past %d decompressed bytes (the cap)", u.limits.totalBytes)
	}
	return nil
}

// entryName checks an entry's name and splits it into the chart's directory
// and the name inside it ("" for the directory itself).
func entryName(raw string) (dir, name string, err error) {
	switch {
	case strings.ContainsRune(raw, '\\'):
		return "", "", errors.New(`has a backslash in its name`)
	case strings.HasPrefix(raw, "/") || drivePath.MatchString(raw):
		return "", "", errors.New("has an absolute name")
	case strings.ContainsFunc(raw, unicode.IsControl):
		return "", "", errors.New("has a control character in its name")
	case slices.Contains(strings.Split(raw, "/"), ".."):
		return "", "", errors.New(`has a ".." element in its name`)
	}
	clean := path.Clean(raw)
	if clean == "." {
		return "", "", errors.New("has an empty name")
	}
	dir, name, _ = strings.Cut(clean, "/")
	return dir, name, nil
}

// load builds a chart from its files, as loader.LoadFiles does, but loads
// the subcharts in charts/ itself, in name order, so that subchart archives
// are unpacked within the caps. dir is the chart's path in the archive, for
// errors: "" for the root chart, "charts/x/" for a subchart.
func (u *unpacker) load(files []*loader.BufferedFile, dir string, depth int) (*chart.Chart, error) {
	if depth > u.limits.depth {
		return nil, newError(ReasonLimitExceeded, "%s: subcharts are nested more than %d deep", dir, u.limits.depth)
	}
	own, subs := splitSubcharts(files)
	if err := checkChartName(own, dir); err != nil {
		return nil, err
	}
	c, err := loader.LoadFiles(own)
	if err != nil {
		return nil, newError(ReasonChartInvalid, "failed to load %sChart.yaml: %v", dir, err)
	}
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		sc, err := u.subchart(n, subs[n], dir, depth)
		if err != nil {
			return nil, err
		}
		c.AddDependency(sc)
	}
	return c, nil
}

// splitSubcharts separates a chart's own files from those of its subcharts,
// by subchart directory (or archive) name, as loader.LoadFiles does:
// provenance files stay the chart's, names starting with "_" or "." are
// ignored.
func splitSubcharts(files []*loader.BufferedFile) ([]*loader.BufferedFile, map[string][]*loader.BufferedFile) {
	var own []*loader.BufferedFile
	subs := map[string][]*loader.BufferedFile{}
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Name, "charts/")
		if !ok || path.Ext(f.Name) == ".prov" {
			own = append(own, f)
			continue
		}
		n := strings.SplitN(rest, "/", 2)[0]
		if strings.IndexAny(n, "_.") == 0 {
			continue
		}
		subs[n] = append(subs[n], &loader.BufferedFile{Name: rest, Data: f.Data})
	}
	return own, subs
}

// subchart loads the subchart n of the chart at dir: a directory or an
// archive (n ending in .tgz).
func (u *unpacker) subchart(n string, files []*loader.BufferedFile, dir string, depth int) (*chart.Chart, error) {
	at := dir + "charts/" + n
	if path.Ext(n) == ".tgz" {
		if len(files) != 1 || files[0].Name != n {
			return nil, newError(ReasonChartInvalid, "%s: a subchart archive must be a single file", at)
		}
		inner, err := u.unpack(files[0].Data, at)
		if err != nil {
			return nil, err
		}
		return u.load(inner, at+"/", depth+1)
	}
	inner := make([]*loader.BufferedFile, 0, len(files))
	for _, f := range files {
		if _, rest, ok := strings.Cut(f.Name, "/"); ok {
			inner = append(inner, &loader.BufferedFile{Name: rest, Data: f.Data})
		}
	}
	return u.load(inner, at+"/", depth+1)
}

// checkChartName requires a Chart.yaml whose name is a plain name: no "/",
// "\" or ".." (CVE-2024-25620: chart names became paths on disk).
func checkChartName(files []*loader.BufferedFile, dir string) error {
	i := slices.IndexFunc(files, func(f *loader.BufferedFile) bool { return f.Name == "Chart.yaml" })
	if i < 0 {
		return newError(ReasonChartInvalid, "%sChart.yaml is missing", dir)
	}
	var meta struct {
		Name string `json:"name"`
	}
	if err := yaml.Unmarshal(files[i].Data, &meta); err != nil {
		return newError(ReasonChartInvalid, "failed to read %sChart.yaml: %v", dir, err)
	}
	if !validChartName(meta.Name) {
		return newError(ReasonChartInvalid, `%sChart.yaml: name %q is not a valid chart name (no "/", "\", ".." or control characters)`, dir, meta.Name)
	}
	return nil
}

func validChartName(n string) bool {
	return n != "" && n != "." && !strings.ContainsAny(n, `/\`) && !strings.Contains(n, "..") &&
		!strings.ContainsFunc(n, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) })
}

// archiveError is ChartInvalid for an archive entry (or the whole archive
// when entry is "").
func archiveError(where, entry, format string, args ...any) *Error {
	return newError(ReasonChartInvalid, "%s%s", archivePrefix(where, entry), fmt.Sprintf(format, args...))
}

func archiveLimitError(where, entry, format string, args ...any) *Error {
	return newError(ReasonLimitExceeded, "%s%s", archivePrefix(where, entry), fmt.Sprintf(format, args...))
}

// archivePrefix names an entry, and the subchart archive it is in.
func archivePrefix(where, entry string) string {
	switch {
	case entry != "" && where != "":
		return fmt.Sprintf("archive entry %q in %s ", entry, where)
	case entry != "":
		return fmt.Sprintf("archive entry %q ", entry)
	case where != "":
		return where + ": "
	}
	return ""
}

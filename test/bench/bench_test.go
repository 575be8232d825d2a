package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchMode reports whether the full workloads run (CAIRN_BENCH=1, as in
// `make bench`); otherwise each benchmark runs a tiny one.
func benchMode() bool { return os.Getenv("CAIRN_BENCH") == "1" }

// pick returns full in bench mode and quick otherwise.
func pick[T any](full, quick T) T {
	if benchMode() {
		return full
	}
	return quick
}

// samples are the durations of repeated runs of one operation.
type samples []time.Duration

// timeIt runs fn n times (with the run's index) and returns the duration of
// each run; the first error fails the test.
func timeIt(t testing.TB, n int, fn func(i int) error) samples {
	t.Helper()
	s := make(samples, 0, n)
	for i := range n {
		start := time.Now()
		err := fn(i)
		s = append(s, time.Since(start))
		if err != nil {
			t.Fatalf("run %d of %d: %v", i+1, n, err)
		}
	}
	return s
}

func (s samples) total() time.Duration {
	var d time.Duration
	for _, x := range s {
		d += x
	}
	return d
}

func (s samples) median() time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// table is a Markdown table with a title and notes under it.
type table struct {
	title  string
	header []string
	rows   [][]string
	notes  []string
}

func newTable(title string, header ...string) *table {
	return &table{title: title, header: header}
}

// add appends a row; each cell is formatted with fmt.Sprint.
func (tb *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	tb.rows = append(tb.rows, row)
}

func (tb *table) note(format string, args ...any) {
	tb.notes = append(tb.notes, fmt.Sprintf(format, args...))
}

func (tb *table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", tb.title)
	line := func(cells []string) { fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | ")) }
	line(tb.header)
	sep := make([]string, len(tb.header))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range tb.rows {
		line(r)
	}
	if len(tb.notes) > 0 {
		b.WriteString("\n")
		for _, n := range tb.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

var printMu sync.Mutex

// report prints the table to stdout and, in bench mode, writes it to
// results/<name>.md for the docs to quote.
func (tb *table) report(t testing.TB, name string) {
	t.Helper()
	s := tb.String()
	if !benchMode() {
		s = strings.Replace(s, "\n\n", " (quick run: set CAIRN_BENCH=1 for the real figures)\n\n", 1)
	}
	printMu.Lock()
	fmt.Println("\n" + s)
	printMu.Unlock()
	if !benchMode() {
		return
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("<!-- %s, %s, written by `make bench` -->\n\n", time.Now().UTC().Format(time.RFC3339), machine())
	if err := os.WriteFile(filepath.Join("results", name+".md"), []byte(header+s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// machine describes where the figures were taken.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d CPUs", host, runtime.NumCPU())
}

// ms formats a duration in milliseconds with three significant digits.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// ratio formats a/b as "12×", or "0.5× (slower)" below 1.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	if a < b {
		return fmt.Sprintf("%.2g× (slower)", a/b)
	}
	return fmt.Sprintf("%.2g×", a/b)
}

// byteSize formats a byte count as B, KiB or MiB.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// tool returns the path of a baseline CLI built by hack/bench-tools.sh: from
// $CAIRN_BENCH_TOOLS, else from the script's cache (building it in bench
// mode). Without it a quick run returns "" and the caller skips the
// comparison; bench mode fails.
func tool(t testing.TB, name string) string {
	t.Helper()
	dir := builtDir(t, "CAIRN_BENCH_TOOLS", "bench-tools.sh")
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); dir == "" || err != nil {
		if benchMode() {
			t.Fatalf("baseline %s not found in %q (run hack/bench-tools.sh or set CAIRN_BENCH_TOOLS)", name, dir)
		}
		return ""
	}
	return path
}

// builtDir returns the directory a build script of hack/ prints (its cache):
// $env when set, else the script's output, built if missing in bench mode and
// only read (--cached) in a quick run, which gets "" when nothing is built.
func builtDir(t testing.TB, env, script string) string {
	t.Helper()
	if dir := os.Getenv(env); dir != "" {
		return dir
	}
	var args []string
	if !benchMode() {
		args = append(args, "--cached") // never build in a quick run
	}
	out, err := exec.Command("../../hack/"+script, args...).Output()
	if err != nil && benchMode() {
		t.Fatalf("failed to build with hack/%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/render"
)

// B3: CUE instances rendered per second by render.Renderer in-process
// against `cue export` of the same module with the same values, one process
// per instance (how a CI script or a plugin would run it).

const (
	webappRepo = "../../examples"
	webappPath = "modules/webapp"
	cueTarget  = 10.0 // cairn renders/s ÷ cue export renders/s
)

func TestB3RenderThroughput(t *testing.T) {
	g := NewWithT(t)
	n, nCue := pick(200, 3), pick(20, 2)
	r := render.NewRenderer()
	defer r.Close()
	src := os.DirFS(webappRepo)

	// Warm-up, untimed: the first render pays for one-time setup.
	_, err := renderWebapp(r, src, n)
	g.Expect(err).NotTo(HaveOccurred())
	seq := timeIt(t, n, func(i int) error {
		_, err := renderWebapp(r, src, i)
		return err
	})
	par := parallel(t, n, 2, func(_, i int) error {
		_, err := renderWebapp(r, src, i)
		return err
	})

	tb := newTable("B3 render: webapp module, in-process vs `cue export`",
		"mode", "instances", "wall time", "wall time ÷ instances", "renders/s", "vs cue export (same concurrency)")
	seqRate, parRate := rate(n, seq.total()), rate(n, par)
	cue := tool(t, "cue")
	if cue == "" {
		t.Log("cue not built (hack/bench-tools.sh): comparing with cue export skipped")
		tb.add("cairn render.Renderer, sequential", n, ms(seq.total()), ms(seq.total()/time.Duration(n)), fmt.Sprintf("%.0f", seqRate), "n/a")
		tb.report(t, "B3")
		return
	}
	e := newCueExporter(t, cue, 2)
	cueSeq := e.checkedRuns(t, r, src, nCue)
	cuePar := parallel(t, nCue, 2, func(w, i int) error {
		_, err := e.export(w, i)
		return err
	})
	cueSeqRate, cueParRate := rate(nCue, cueSeq.total()), rate(nCue, cuePar)
	tb.add("cairn render.Renderer, sequential", n, ms(seq.total()), ms(seq.total()/time.Duration(n)), fmt.Sprintf("%.0f", seqRate), ratio(seqRate, cueSeqRate))
	tb.add("cairn render.Renderer, 2 goroutines", n, ms(par), ms(par/time.Duration(n)), fmt.Sprintf("%.0f", parRate), ratio(parRate, cueParRate))
	tb.add("`cue export ./ -e objects --out json`, sequential", nCue, ms(cueSeq.total()), ms(cueSeq.total()/time.Duration(nCue)), fmt.Sprintf("%.1f", cueSeqRate), "1×")
	tb.add("`cue export ./ -e objects --out json`, 2 processes at a time", nCue, ms(cuePar), ms(cuePar/time.Duration(nCue)), fmt.Sprintf("%.1f", cueParRate), "1×")
	tb.note("each instance has its own values (replicas, image, env, ingress host): 5 objects; the objects of all %d sequential `cue export` instances are checked equal to cairn's", nCue)
	tb.note("one Renderer shared by the goroutines; one process per instance for cue (as a script or a plugin would run it)")
	tb.note("cue %s built by hack/bench-tools.sh; GOMAXPROCS %d; one untimed warm-up render and export first", cueVersion(t, cue), runtime.GOMAXPROCS(0))
	tb.note("target ≥%.0f× (sequential): %s", cueTarget, verdict(seqRate/cueSeqRate >= cueTarget))
	tb.report(t, "B3")
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// webappValues are instance i's values: all differ, all give 5 objects.
func webappValues(i int) []byte {
	b, _ := json.Marshal(map[string]any{
		"replicas": i%5 + 1,
		"image":    fmt.Sprintf("ghcr.io/stefanprodan/podinfo:6.7.%d", i),
		"env":      map[string]string{"INDEX": fmt.Sprint(i), "MODE": "bench"},
		"ingress":  map[string]any{"host": fmt.Sprintf("web-%d.example.com", i)},
	})
	return b
}

func webappName(i int) string { return fmt.Sprintf("web-%d", i) }

// renderWebapp renders instance i and checks that its values took effect.
func renderWebapp(r *render.Renderer, src iofs.FS, i int) ([]*unstructured.Unstructured, error) {
	res, err := r.Render(context.Background(), render.Request{
		Name: webappName(i), Namespace: "team-a", Source: src, LocalPath: webappPath, Values: webappValues(i),
	})
	if err != nil {
		return nil, err
	}
	return res.Objects, checkWebapp(res.Objects, i)
}

func checkWebapp(objs []*unstructured.Unstructured, i int) error {
	if len(objs) != 5 {
		return fmt.Errorf("instance %d: rendered %d objects, want 5", i, len(objs))
	}
	for _, o := range objs {
		if o.GetName() != webappName(i) || o.GetNamespace() != "team-a" {
			return fmt.Errorf("instance %d: %s %s/%s, want team-a/%s", i, o.GetKind(), o.GetNamespace(), o.GetName(), webappName(i))
		}
		if o.GetKind() != "Deployment" {
			continue
		}
		replicas, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		if replicas != int64(i%5+1) {
			return fmt.Errorf("instance %d: Deployment replicas %d, want %d", i, replicas, i%5+1)
		}
	}
	return nil
}

// parallel runs fn for i in 0..n-1 from workers goroutines (worker w takes
// every workers-th i from w) and returns the wall time.
func parallel(t *testing.T, n, workers int, fn func(worker, i int) error) time.Duration {
	t.Helper()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := fn(w, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return wall
}

// cueExporter runs `cue export` of the webapp module, one copy of the
// module per worker, with an instance's values in a file of the package.
type cueExporter struct {
	cue, cacheDir string
	dirs          []string
}

func newCueExporter(t *testing.T, cue string, workers int) *cueExporter {
	t.Helper()
	e := &cueExporter{cue: cue, cacheDir: t.TempDir()}
	for range workers {
		dir := filepath.Join(t.TempDir(), "webapp")
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(webappRepo, webappPath))); err != nil {
			t.Fatal(err)
		}
		e.dirs = append(e.dirs, dir)
	}
	if _, err := e.export(0, 0); err != nil { // warm-up, untimed
		t.Fatal(err)
	}
	return e
}

// export writes instance i's name and values into worker's copy and runs
// cue export there.
func (e *cueExporter) export(worker, i int) ([]byte, error) {
	dir := e.dirs[worker]
	input := fmt.Sprintf("package webapp\n\ninstance: {name: %q, namespace: \"team-a\"}\nvalues: %s\n", webappName(i), webappValues(i))
	if err := os.WriteFile(filepath.Join(dir, "zz_bench_input.cue"), []byte(input), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cue, "export", "./", "-e", "objects", "--out", "json")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUE_CACHE_DIR="+e.cacheDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("cue export of instance %d: %w: %s", i, err, stderr.String())
	}
	return out, nil
}

// checkedRuns exports instances 0..n-1 one after the other, checks that each
// output holds the same objects as cairn's render, and returns their times.
func (e *cueExporter) checkedRuns(t *testing.T, r *render.Renderer, src iofs.FS, n int) samples {
	t.Helper()
	outs := make([][]byte, n)
	runs := timeIt(t, n, func(i int) (err error) {
		outs[i], err = e.export(0, i)
		return err
	})
	for i, out := range outs {
		objs, err := renderWebapp(r, src, i)
		if err != nil {
			t.Fatal(err)
		}
		NewWithT(t).Expect(cueObjects(t, out)).To(Equal(byIdentity(t, objs)), "instance %d: cue export and cairn differ", i)
	}
	return runs
}

// cueObjects indexes the objects of `cue export -e objects` (a struct keyed
// by id) by kind/namespace/name.
func cueObjects(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var byID map[string]map[string]any
	if err := json.Unmarshal(out, &byID); err != nil {
		t.Fatalf("failed to parse cue export output: %v", err)
	}
	m := map[string]any{}
	for _, o := range byID {
		u := unstructured.Unstructured{Object: o}
		m[identity(&u)] = o
	}
	return m
}

// byIdentity indexes cairn's objects by kind/namespace/name, as plain JSON
// values so that they compare with cue's.
func byIdentity(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	m := map[string]any{}
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		m[identity(o)] = v
	}
	return m
}

func identity(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func cueVersion(t *testing.T, cue string) string {
	out, err := exec.Command(cue, "version").Output()
	if err != nil {
		t.Fatalf("failed to run cue version: %v", err)
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	return string(bytes.TrimPrefix(first, []byte("cue version ")))
}

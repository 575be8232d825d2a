package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// The B2 profile: the fleet synced by the engine in-process on a fresh
// cluster, so that its requests are counted by a RoundTripper (per instance),
// its CPU profiled with pprof, and its progress lines timestamped to split the
// wall time into render, apply and health wait.

// profileFleet syncs m instances in-process (cold, then one instance changed)
// and returns a table of where the time and the requests go.
func profileFleet(t *testing.T, m int) *table {
	var tb *table
	t.Run(fmt.Sprintf("profile-M=%d", m), func(t *testing.T) {
		p := newFleetProfile(t, m, 0)
		cold := p.cold()
		change := p.changeOne()
		tb = p.table(cold, change)
	})
	if tb != nil && benchMode() {
		t.Run(fmt.Sprintf("profile-M=%d-concurrency=%d", m, sweepConcurrency), func(t *testing.T) {
			p := newFleetProfile(t, m, sweepConcurrency)
			cold := p.cold()
			tb.add(fmt.Sprintf("cold at concurrency %d (another fresh cluster): wall time to all Ready", sweepConcurrency), secs(cold.wall))
			tb.add(fmt.Sprintf("cold at concurrency %d: time split", sweepConcurrency), cold.phases)
			tb.add(fmt.Sprintf("cold at concurrency %d: API server mean latency", sweepConcurrency), cold.server.latencies())
		})
	}
	if tb == nil { // it failed (its failure is reported), or -run left it out
		t.SkipNow()
	}
	return tb
}

// sweepConcurrency is the engine concurrency of the second profiled run, to
// compare with the default.
const sweepConcurrency = 8

type fleetProfile struct {
	t        *testing.T
	g        *WithT
	ctx      context.Context
	m        int
	c        *benchCluster
	rc       *requestCounter
	engine   *reconciler.Engine
	opts     reconciler.Options
	dir      string
	progress *progressLog
	pprof    string // CPU profile of the cold sync
	pprofOne string // CPU profile of the one-instance change
}

// newFleetProfile prepares an in-process engine on a fresh cluster;
// concurrency 0 keeps the default.
func newFleetProfile(t *testing.T, m, concurrency int) *fleetProfile {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	t.Cleanup(cancel)
	p := &fleetProfile{t: t, g: NewWithT(t), ctx: ctx, m: m, c: startBenchCluster(t, true), rc: newRequestCounter(),
		dir: filepath.Join(t.TempDir(), "platform"), progress: &progressLog{}}
	writeFleetRepo(t, p.dir, m)
	cl, err := reconciler.NewCluster(p.c.countedConfig(p.rc))
	p.g.Expect(err).NotTo(HaveOccurred())
	p.opts = reconciler.DefaultOptions()
	p.opts.RenderCacheDir = filepath.Join(t.TempDir(), "cache")
	p.opts.Progress = p.progress
	suffix := ""
	if concurrency > 0 {
		p.opts.Concurrency, p.opts.ApplyConcurrency = concurrency, concurrency
		suffix = fmt.Sprintf("-concurrency%d", concurrency)
	}
	r := render.NewRenderer()
	t.Cleanup(func() { _ = r.Close() })
	p.engine = reconciler.New(cl, r, p.opts)
	// The health watch, as the controller and a polling `cairn sync` open it, ends before the
	// cluster stops (cleanups run last first): an API server stopping with a watch open
	// waits for it.
	watchCtx, endWatch := context.WithCancel(ctx)
	t.Cleanup(endWatch)
	p.g.Expect(p.engine.WatchHealth(watchCtx)).To(Succeed())
	dir := t.TempDir()
	if benchMode() {
		dir = "results"
		p.g.Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	}
	p.pprof = filepath.Join(dir, fmt.Sprintf("B2-cpu-M%d%s.pprof", m, suffix))
	p.pprofOne = filepath.Join(dir, fmt.Sprintf("B2-cpu-M%d%s-one-change.pprof", m, suffix))
	return p
}

// profiled is a measured in-process sync.
type profiled struct {
	measurement
	cairnCPU time.Duration
	phases   phaseTimes
	res      *reconciler.SyncResult
}

// sync syncs the directory once, writing a CPU profile to pprofPath unless
// it is empty.
func (p *fleetProfile) sync(pprofPath string) profiled {
	p.t.Helper()
	var out profiled
	p.progress.reset()
	cpuBefore := selfCPU()
	out.measurement = p.c.measure(p.t, p.rc, func() error {
		if pprofPath != "" {
			f, err := os.Create(pprofPath)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		tree, err := gitsource.ReadDir(p.dir, gitsource.DefaultLimits())
		if err != nil {
			return err
		}
		sha := "dir:" + strings.TrimPrefix(tree.Digest(), "sha256:")[:12]
		p.progress.start = time.Now()
		out.res, err = p.engine.Sync(p.ctx, reconciler.Revision{SHA: sha, Tree: tree})
		p.progress.end = time.Now()
		return err
	})
	out.cairnCPU = selfCPU() - cpuBefore
	out.phases = p.progress.phases()
	p.g.Expect(out.res.Error).NotTo(HaveOccurred())
	return out
}

func (p *fleetProfile) cold() profiled {
	out := p.sync(p.pprof)
	ready := 0
	for _, i := range out.res.Instances {
		if i.Ready {
			ready++
		}
	}
	p.g.Expect(out.res.Instances).To(HaveLen(p.m))
	p.g.Expect(ready).To(Equal(p.m), "instances Ready after the in-process sync")
	p.t.Logf("in-process M=%d cold: %s, %s", p.m, secs(out.wall), out.client)
	return out
}

// changeOne changes one instance's image; the directory revision has no diff,
// so the spec digests decide that only that instance is affected.
func (p *fleetProfile) changeOne() profiled {
	writeFiles(p.t, p.dir, map[string]string{fleetFile(1): fleetInstance(1, "6.7.1")})
	out := p.sync(p.pprofOne)
	_, changed := fleetName(1)
	for _, i := range out.res.Instances {
		if i.Name == changed {
			p.g.Expect(i.Action).To(BeEquivalentTo("Updated"), i.Message)
			p.g.Expect(i.Applied).To(Equal(1), i.Message)
		} else {
			p.g.Expect(i.Action).To(BeEquivalentTo("Unchanged"), "%s/%s", i.Namespace, i.Name)
		}
	}
	p.t.Logf("in-process M=%d one changed: %s, %s", p.m, secs(out.wall), out.client)
	return out
}

func (p *fleetProfile) table(cold, change profiled) *table {
	tb := newTable(fmt.Sprintf("B2 profile: the engine in-process at M=%d (cold sync, then one instance changed)", p.m), "measure", "value")
	m := float64(p.m)
	busy := cold.cairnCPU
	for _, d := range cold.cpu {
		busy += d
	}
	tb.add("engine concurrency (reconciler.DefaultOptions, as the CLI's): renders / applies at once",
		fmt.Sprintf("%d / %d", p.opts.Concurrency, p.opts.ApplyConcurrency))
	tb.add("cold: wall time to all Ready", secs(cold.wall))
	tb.add("cold: time split (from the engine's progress lines)", cold.phases)
	tb.add("cold: CPU time", fmt.Sprintf("cairn engine %.1f s; %s; total %.1f s of %.1f s available on 2 cores (%.0f%% busy)",
		cold.cairnCPU.Seconds(), cold.cpu, busy.Seconds(), 2*cold.wall.Seconds(), 100*busy.Seconds()/(2*cold.wall.Seconds())))
	tb.add("cold: cairn requests by verb (RoundTripper)", cold.client)
	tb.add("cold: cairn requests per instance", fmt.Sprintf("%.2f (%s)", float64(cold.client.total())/m, perInstance(cold.client, m)))
	tb.add("cold: cairn requests by resource", cold.client.resources())
	tb.add("cold: requests by verb (apiserver_request_total, all clients)", cold.server)
	tb.add("cold: API server mean latency", cold.server.latencies())
	tb.add("cold: CPU profile of the engine, top by flat", pprofTop(p.t, p.pprof, false, 12))
	tb.add("cold: CPU profile of the engine, top by cumulative (cairn.dev)", pprofTop(p.t, p.pprof, true, 12))
	tb.add("one instance changed: wall time (engine only, no process start or git)", secs(change.wall))
	tb.add("one instance changed: time split", change.phases)
	tb.add("one instance changed: cairn requests by resource", change.client.resources())
	tb.add("one instance changed: CPU profile of the engine, top by cumulative (cairn.dev)", pprofTop(p.t, p.pprofOne, true, 12))
	tb.note("CPU profiles: %s (cold) and %s (one change); `go tool pprof -top <file>`", p.pprof, p.pprofOne)
	return tb
}

// perInstance divides each verb's count by m.
func perInstance(rc requestCounts, m float64) string {
	var parts []string
	for _, v := range verbOrder {
		if n := rc.byVerb[v]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", v, float64(n)/m))
		}
	}
	return strings.Join(parts, ", ")
}

// pprofTop summarises a CPU profile with `go tool pprof -top`: the functions
// with the most flat time, or the cairn.dev functions with the most
// cumulative time.
func pprofTop(t *testing.T, path string, cum bool, n int) string {
	args := []string{"tool", "pprof", "-top", "-nodecount=200"}
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.Command("go", append(args, path)...).Output()
	if err != nil {
		t.Logf("go tool pprof: %v", err)
		return "n/a"
	}
	var parts []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") || len(parts) == n {
			continue
		}
		name := strings.Join(f[5:], " ")
		if cum && (!strings.HasPrefix(name, "cairn.dev/") || strings.HasPrefix(name, "cairn.dev/cairn/test/")) {
			continue
		}
		pct := f[1]
		if cum {
			pct = f[4]
		}
		parts = append(parts, fmt.Sprintf("%s %s", shortFunc(name), pct))
	}
	return strings.Join(parts, ", ")
}

func shortFunc(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// selfCPU is the CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// progressLog timestamps the engine's progress lines ("render ns/name (why)",
// "apply ns/name: n objects", "wait ns/name", "ns/name ready: ...").
type progressLog struct {
	mu         sync.Mutex
	start, end time.Time
	lines      []progressLine
}

type progressLine struct {
	at   time.Time
	text string
}

func (l *progressLog) Write(b []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		l.lines = append(l.lines, progressLine{at: now, text: s})
	}
	return len(b), nil
}

func (l *progressLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = nil
}

// phaseTimes splits a sync's wall time by what the engine reported.
type phaseTimes struct {
	total               time.Duration
	beforeRender        time.Duration // declarations, Platform, LIST of the instances
	render              time.Duration // first render line to first apply-phase line
	apply               time.Duration // first apply-phase line to the last instance done
	after               time.Duration // the Platform status
	applyEach, waitEach []time.Duration
	instances           int
}

// phases reads the timestamps; the split is empty when the engine printed
// nothing it recognises.
func (l *progressLog) phases() phaseTimes {
	l.mu.Lock()
	defer l.mu.Unlock()
	pt := phaseTimes{total: l.end.Sub(l.start)}
	var firstRender, firstApply, last time.Time
	applyAt, waitAt := map[string]time.Time{}, map[string]time.Time{}
	for _, ln := range l.lines {
		verb, rest, _ := strings.Cut(ln.text, " ")
		key := strings.TrimSuffix(strings.Fields(rest + " x")[0], ":")
		switch {
		case verb == "render":
			if firstRender.IsZero() {
				firstRender = ln.at
			}
			continue
		case verb == "apply":
			applyAt[key] = ln.at
		case verb == "wait":
			waitAt[key] = ln.at
			if a, ok := applyAt[key]; ok {
				pt.applyEach = append(pt.applyEach, ln.at.Sub(a))
			}
		case strings.HasPrefix(rest, "ready") || strings.HasPrefix(rest, "failed"):
			pt.instances++
			if w, ok := waitAt[verb]; ok {
				pt.waitEach = append(pt.waitEach, ln.at.Sub(w))
			}
		case verb == "prune":
		default:
			continue
		}
		if firstApply.IsZero() {
			firstApply = ln.at
		}
		last = ln.at
	}
	if firstRender.IsZero() || firstApply.IsZero() {
		return pt
	}
	pt.beforeRender = firstRender.Sub(l.start)
	pt.render = firstApply.Sub(firstRender)
	pt.apply = last.Sub(firstApply)
	pt.after = l.end.Sub(last)
	return pt
}

func (pt phaseTimes) String() string {
	if pt.render == 0 && pt.apply == 0 {
		return fmt.Sprintf("total %s (no progress lines recognised)", secs(pt.total))
	}
	s := fmt.Sprintf("total %s = before render %s + render %s + apply/wait/status %s + Platform status %s",
		secs(pt.total), secs(pt.beforeRender), secs(pt.render), secs(pt.apply), secs(pt.after))
	if len(pt.applyEach) > 0 {
		s += fmt.Sprintf("; per instance: apply %s (median, max %s), health wait %s (median, max %s)",
			ms(median(pt.applyEach)), ms(slices.Max(pt.applyEach)), ms(median(pt.waitEach)), ms(maxOr0(pt.waitEach)))
	}
	return s
}

func median(d []time.Duration) time.Duration { return samples(d).median() }

func maxOr0(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

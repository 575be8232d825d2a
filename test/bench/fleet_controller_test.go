package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

// B2 through the controller: the same fleet, on a fresh cluster of its own, synced
// by one `cairn controller` process (polling file:// every second) instead of
// `cairn sync --once`. Cold: from the start of the process until a watch of the
// ModuleInstances sees the last of the M become Ready at the first commit. One change: from the
// commit until the changed instance is Ready at the new commit (read every 50 ms).

// controllerPoll is the controller's --interval in B2; controllerDrift its
// --drift-interval, short enough that the one-change commit can be made while a
// drift check of the whole fleet runs (see driftInFlight).
const (
	controllerPoll  = time.Second
	controllerDrift = 30 * time.Second
)

// controllerRun is one `cairn controller` process of B2.
type controllerRun struct {
	*process
	f *fleetRun
	// pprof is where it serves Go's profiles ("" unless $CAIRN_BENCH_PROFILE names
	// a directory to keep its heap profile after the cold sync in).
	pprof string
}

// startController starts `cairn controller` against the fleet's repository.
func (f *fleetRun) startController(extra ...string) *controllerRun {
	f.t.Helper()
	return f.startReplica("cairn controller", nil, f.cache, extra...)
}

// startReplica starts a `cairn controller` process named name, with env added and a
// cache directory of its own: replicas beside each other must not share one. It runs
// as the Deployment runs it, with GOMEMLIMIT at the controller's own share of the
// container's memory (manifests/controller, docs/controller.md#installing-the-controller):
// the Go runtime then collects harder as the heap nears it, which lowers the peak RSS
// measured, and the engine's default concurrency follows it as in the Deployment
// (reconciler.DefaultOptions).
func (f *fleetRun) startReplica(name string, env []string, cache string, extra ...string) *controllerRun {
	f.t.Helper()
	env = append([]string{"GOMEMLIMIT=" + controller.GoMemLimit()}, env...)
	args := append([]string{"controller", "--repo", "file://" + f.repo, "--branch", "main",
		"--interval", controllerPoll.String(), "--drift-interval", controllerDrift.String(), "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--kubeconfig", f.c.Kubeconfig, "--cache-dir", cache}, extra...)
	pprof := ""
	if os.Getenv("CAIRN_BENCH_PROFILE") != "" {
		pprof = freeAddr(f.t)
		args = append(args, "--pprof-bind-address", pprof)
	}
	p := startProcess(f.t, f.ctx, name, env, f.bin, args...)
	return &controllerRun{process: p, f: f, pprof: pprof}
}

// keepHeapProfile writes the controller's heap profile to $CAIRN_BENCH_PROFILE
// (go tool pprof -sample_index=inuse_space reads what it holds), and returns its live
// heap: the bytes still allocated right after a collection it forces (0 without a
// profile).
func (c *controllerRun) keepHeapProfile(name string) int64 {
	dir := os.Getenv("CAIRN_BENCH_PROFILE")
	if c.pprof == "" || dir == "" {
		return 0
	}
	live, err := c.liveHeap()
	if err != nil {
		c.f.t.Logf("no live heap: %v", err)
	}
	b, err := c.getPprof("/debug/pprof/heap") // its in-use figures are of that collection
	path := filepath.Join(dir, name)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		c.f.t.Logf("no heap profile: %v", err)
		return live
	}
	c.f.t.Logf("heap profile of the controller: %s (live heap %s)", path, byteSize(live))
	return live
}

// liveHeap forces a collection in the controller and reads its HeapAlloc then (the
// runtime.MemStats that the heap profile's text form ends with).
func (c *controllerRun) liveHeap() (int64, error) {
	b, err := c.getPprof("/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapAlloc in the heap profile of %s", c.name)
}

// getPprof reads path from the controller's pprof server.
func (c *controllerRun) getPprof(path string) ([]byte, error) {
	resp, err := http.Get("http://" + c.pprof + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// process is a long-running child process of a benchmark, its output in a log
// file; it is killed when the test ends.
type process struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited, err set
	err    error
}

// startProcess starts bin with args and env added to the test's environment.
func startProcess(t testing.TB, ctx context.Context, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{t: t, name: name, log: filepath.Join(t.TempDir(), "process.log"), exited: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("failed to start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = out.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// running reports whether the process has not exited; when it has, it says
// how in err.
func (p *process) running() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v: %s", p.name, p.err, p.tail())
	default:
		return nil
	}
}

// stop ends the process with SIGTERM, as a rollout would; it must exit cleanly
// within 30 s.
func (p *process) stop() {
	p.t.Helper()
	if os.Getenv("CAIRN_BENCH_LOG") != "" {
		p.t.Logf("%s log:\n%s", p.name, p.output())
	}
	if err := p.running(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("failed to signal %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			p.t.Fatalf("%s must exit cleanly on SIGTERM: %v: %s", p.name, p.err, p.tail())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatalf("%s still runs 30 s after SIGTERM: %s", p.name, p.tail())
	}
}

func (p *process) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *process) tail() string { return tail(p.output(), 20) }

// cpu is the process's user+system CPU time so far.
func (p *process) cpu() time.Duration {
	d, _ := procCPU(strconv.Itoa(p.cmd.Process.Pid))
	return d
}

// driftInFlight reports whether the controller's log says a drift check has
// started and has not finished or been interrupted since.
func (c *controllerRun) driftInFlight() bool {
	log := c.output()
	return strings.Count(log, "drift check started") >
		strings.Count(log, "drift check finished")+strings.Count(log, "drift check interrupted")
}

// awaitDriftCheck waits (up to two drift intervals) until a drift check runs, so
// that the one-change commit lands while the whole fleet is being checked: the
// commit must not wait for that check.
func (c *controllerRun) awaitDriftCheck() {
	c.f.t.Helper()
	deadline := time.Now().Add(2 * controllerDrift)
	for !c.driftInFlight() {
		if time.Now().After(deadline) {
			c.f.t.Fatalf("no drift check started within %s: %s", 2*controllerDrift, c.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// coldController starts the controller on the empty cluster and times it until
// every instance is Ready at the first commit; the controller keeps running.
func (f *fleetRun) coldController(extra ...string) (cliRun, *controllerRun) {
	m, cs := f.coldControllers(30*time.Minute, func() []*controllerRun { return []*controllerRun{f.startController(extra...)} })
	c := cs[0]
	run := cliRun{measurement: m, rss: vmHWM(c.cmd.Process.Pid), cairnCPU: c.cpu()}
	live := c.keepHeapProfile(fmt.Sprintf("B2-heap-M%d-controller%s.pprof", f.m, strings.Join(extra, "")))
	heap := "" // measured only where a heap profile is kept ($CAIRN_BENCH_PROFILE)
	if live > 0 {
		heap = ", live heap " + byteSize(live)
	}
	f.t.Logf("M=%d cold through the controller %v: %s, RSS %s%s, CPU %s, %s", f.m, extra, secs(run.wall), byteSize(run.rss), heap, cpuSummary(run), run.server)
	return run, c
}

// coldControllers runs start, which starts one or more controller processes on the
// empty cluster, and times them from then until every instance is Ready at the
// first commit, for at most limit; they keep running. A process that exits fails
// the step at once rather than at the limit.
func (f *fleetRun) coldControllers(limit time.Duration, start func() []*controllerRun) (measurement, []*controllerRun) {
	var cs []*controllerRun
	m := f.c.measure(f.t, nil, func() error {
		ready, stop, err := f.watchReady(f.first)
		if err != nil {
			return err
		}
		defer stop()
		cs = start()
		deadline := time.After(limit)
		check := time.NewTicker(time.Second)
		defer check.Stop()
		for {
			select {
			case <-ready:
				return nil
			case <-check.C:
				for _, c := range cs {
					if err := c.running(); err != nil {
						return fmt.Errorf("%d of %d instances Ready: %w", f.readyAt(f.first), f.m, err)
					}
				}
			case <-deadline:
				return fmt.Errorf("%d of %d instances Ready after %s: %s", f.readyAt(f.first), f.m, limit, cs[0].tail())
			}
		}
	})
	return m, cs
}

// watchReady watches the ModuleInstances and closes ready once all M are Ready
// with sha applied: the time is taken when the last status write arrives (a LIST
// every second would be late by up to a second, and would load the API server
// with M instances a second beside the controller it measures). A watch the API
// server closes (it may, under load) is listed and watched again.
func (f *fleetRun) watchReady(sha string) (ready <-chan struct{}, stop func(), err error) {
	wc, err := client.NewWithWatch(f.c.RESTConfig, client.Options{Scheme: reconciler.Scheme})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		at, ready := map[string]bool{}, 0 // ready counts the true entries of at
		see := func(mi *cairnv1.ModuleInstance, deleted bool) bool {
			key := mi.Namespace + "/" + mi.Name
			now := !deleted && conditions.IsTrue(mi, "Ready") && mi.Status.LastAppliedRevision == sha
			switch {
			case now && !at[key]:
				ready++
			case !now && at[key]:
				ready--
			}
			at[key] = now
			return ready == f.m
		}
		for ctx.Err() == nil {
			var list cairnv1.ModuleInstanceList
			if err := wc.List(ctx, &list); err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			clear(at)
			ready = 0
			for i := range list.Items {
				if see(&list.Items[i], false) {
					close(done)
					return
				}
			}
			w, err := wc.Watch(ctx, &cairnv1.ModuleInstanceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if mi, ok := ev.Object.(*cairnv1.ModuleInstance); ok && see(mi, ev.Type == watch.Deleted) {
					w.Stop()
					close(done)
					return
				}
			}
		}
	}()
	return done, cancel, nil
}

// readyAt counts the instances Ready with sha applied.
func (f *fleetRun) readyAt(sha string) int {
	n := 0
	for _, mi := range f.instances() {
		if conditions.IsTrue(&mi, "Ready") && mi.Status.LastAppliedRevision == sha {
			n++
		}
	}
	return n
}

// changeOneController commits a new image for the first instance and times the
// running controller until that instance is Ready at the commit; no other
// instance may be applied.
func (f *fleetRun) changeOneController(c *controllerRun) cliRun {
	writeFiles(f.t, f.repo, map[string]string{fleetFile(1): fleetInstance(1, "6.7.1")})
	ns, name := fleetName(1)
	c.awaitDriftCheck()
	cpuBefore := c.cpu()
	var run cliRun
	var sha string
	run.measurement = f.c.measure(f.t, nil, func() error {
		sha = f.commit("app-0001: podinfo 6.7.1")
		deadline := time.Now().Add(5 * time.Minute)
		for {
			var mi cairnv1.ModuleInstance
			if err := f.c.admin.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: name}, &mi); err != nil {
				return err
			}
			if conditions.IsTrue(&mi, "Ready") && mi.Status.LastAppliedRevision == sha {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s/%s not Ready at %s after 5 minutes: %s", ns, name, sha, c.tail())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	run.cairnCPU = c.cpu() - cpuBefore
	run.rss = vmHWM(c.cmd.Process.Pid)
	for _, mi := range f.instances() {
		want := f.first
		if mi.Name == name {
			want = sha
		}
		f.g.Expect(mi.Status.LastAppliedRevision).To(Equal(want), "%s/%s", mi.Namespace, mi.Name)
	}
	f.t.Logf("M=%d one changed through the controller: %s, %s", f.m, secs(run.wall), run.server)
	return run
}

// addControllerRows adds the controller's rows next to the CLI's.
func (f *fleetRun) addControllerRows(tb *table, label string, cold, change cliRun) {
	tb.add(f.m, label+": empty cluster → all Ready", secs(cold.wall),
		byteSize(cold.rss)+" (peak so far)", cold.server, cold.server.latencies(), cpuSummary(cold))
	tb.add(f.m, label+": one instance changed → Ready", secs(change.wall),
		byteSize(change.rss)+" (peak so far)", change.server, change.server.latencies(), cpuSummary(change))
}

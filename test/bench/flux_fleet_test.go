package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/test/harness"
)

// B6: the B2 fleet synced by cairn's controller and by Flux (source-controller
// and kustomize-controller built by hack/build-flux.sh) in the same run, each
// on a fresh cluster of its own started alike (test/harness, the same API
// server flags): M apps of the 4 objects of B2, app-NNNN in namespace
// fleet-NNNN. cairn syncs one ModuleInstance per app from file://, as B2's
// controller rows; Flux syncs one GitRepository (served over smart HTTP by
// git-http-backend on loopback) and one Kustomization per app with wait:
// true, so that Ready means the Deployment is Available for both. Then, for
// both, one app changed and a no-op interval.

const (
	fluxNamespace = "flux-system"
	fluxSource    = "fleet"
	noopInterval  = 30 * time.Second
)

// fluxFlags are the flags of both Flux controllers beside their own: the
// concurrency of B6 and Flux's documented vertical-scaling settings (client
// QPS and burst, requeue of dependencies), out of cluster, without leader
// election, metrics or health probes.
var fluxFlags = []string{"--concurrent=20", "--kube-api-qps=500", "--kube-api-burst=1000", "--requeue-dependency=5s",
	"--enable-leader-election=false", "--metrics-addr=0", "--health-addr=0", "--log-level=info"}

func TestB6FluxFleet(t *testing.T) {
	m := fleetSize(t)
	flux := builtDir(t, "CAIRN_FLUX_DIR", "build-flux.sh")
	if flux == "" {
		t.Fatal("Flux is not built: make test builds it (hack/build-flux.sh, cached), as make bench-fleet does; or set CAIRN_FLUX_DIR")
	}
	tb := newTable(fmt.Sprintf("B6 fleet side by side: M = %d apps of the 4-object app, cairn's controller and Flux, each from an empty cluster of its own to all Ready, then one app changed and a no-op interval", m),
		"M", "tool", "step", "wall time", "peak RSS", "requests by verb (apiserver_request_total, all clients)", "API server mean latency", "CPU time (tool; control plane)")
	var cairn, flux6 []fleetStep
	t.Run(fmt.Sprintf("cairn M=%d", m), func(t *testing.T) {
		cairn = cairnFleetSteps(newFleetRun(t, m, buildCairn(t)))
	})
	t.Run(fmt.Sprintf("Flux M=%d", m), func(t *testing.T) {
		flux6 = newFluxFleet(t, m, flux).steps()
	})
	if t.Failed() {
		return
	}
	for _, s := range cairn {
		s.addRow(tb, m, "cairn")
	}
	for _, s := range flux6 {
		s.addRow(tb, m, "Flux")
	}
	tb.note("cairn: one `cairn controller --interval %s --drift-interval %s` process (one shard, the default) on the empty cluster, as B2's controller rows (cold from the start of the process, which is when its source is given; one change committed while a drift check runs; engine concurrency reconciler.DefaultOptions, no client-side throttling)", controllerPoll, controllerDrift)
	tb.note("Flux: source-controller and kustomize-controller of %s, out of cluster (admin kubeconfig, %s), started and their workers running before the clock; M Kustomizations (interval 60m, prune, wait, timeout 5m; one per app directory, which holds the app's Namespace and its 4 objects) created untimed, then the clock starts when the GitRepository (interval %s, as cairn's poll) is created and stops when a LIST (every second) finds all M Kustomizations Ready at its revision", filepath.Base(flux), strings.Join(fluxFlags, " "), controllerPoll)
	tb.note("Flux's one change: from the commit until that Kustomization is Ready at it (a GET every 50 ms); every Kustomization of the GitRepository then reconciles the new revision: the next row is from the commit until all M are Ready at it, its requests those after the first row's")
	tb.note("no-op: %s of a running, synced tool with nothing committed; the requests of every client, the control plane's own included", secs(noopInterval))
	tb.note("peak RSS: VmHWM of each process so far (/proc/<pid>/status); CPU: the tool's processes since their start for the cold rows, during the step otherwise; control plane during the step")
	tb.note("the Git repositories: a working tree served as file:// to cairn, the same kind of tree served by git-http-backend (smart HTTP, loopback) to Flux, which cannot read file://")
	tb.note("engine: %s", engineRevision(t))
	reportTables(t, "B6", tb)
	closing := fmt.Sprintf("fleet M=%d: cairn %.1f s, Flux %.1f s, ratio %.1fx, cairn RSS %.0f MiB, Flux RSS %.0f MiB",
		m, cairn[0].wall.Seconds(), flux6[0].wall.Seconds(), flux6[0].wall.Seconds()/cairn[0].wall.Seconds(),
		mib(slices.Max(rssTotals(cairn))), mib(slices.Max(rssTotals(flux6))))
	printMu.Lock()
	fmt.Println(closing)
	printMu.Unlock()
	if benchMode() {
		appendResult(t, "B6", closing)
	}
}

// fleetSize is the M of B6: $CAIRN_FLEET_M, else 20 (3 in a quick run).
func fleetSize(t *testing.T) int {
	s := os.Getenv("CAIRN_FLEET_M")
	if s == "" {
		return pick(20, 3)
	}
	m, err := strconv.Atoi(s)
	if err != nil || m < 1 || m > 9999 {
		t.Fatalf("CAIRN_FLEET_M=%q: want a number of apps from 1 to 9999", s)
	}
	return m
}

// fleetStep is one step of a tool in B6: its requests and the control plane's
// CPU time, and the peak RSS and CPU time of the tool's processes.
type fleetStep struct {
	measurement
	step string
	rss  map[string]int64
	cpu  cpuTimes
}

func (s fleetStep) addRow(tb *table, m int, tool string) {
	rss := make([]string, 0, len(s.rss))
	for _, name := range slices.Sorted(maps.Keys(s.rss)) {
		rss = append(rss, name+" "+byteSize(s.rss[name]))
	}
	if len(s.rss) > 1 {
		rss = append(rss, "sum "+byteSize(s.rssTotal()))
	}
	tb.add(m, tool, s.step, secs(s.wall), strings.Join(rss, ", "), s.server, s.server.latencies(), s.cpu.String()+"; "+s.measurement.cpu.String())
}

func (s fleetStep) rssTotal() int64 {
	var n int64
	for _, v := range s.rss {
		n += v
	}
	return n
}

func rssTotals(steps []fleetStep) []int64 {
	out := make([]int64, len(steps))
	for i, s := range steps {
		out[i] = s.rssTotal()
	}
	return out
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// sample reads the peak RSS and the CPU time so far of each process.
func sample(procs ...*process) (map[string]int64, cpuTimes) {
	rss, cpu := map[string]int64{}, cpuTimes{}
	for _, p := range procs {
		rss[p.name], cpu[p.name] = vmHWM(p.cmd.Process.Pid), p.cpu()
	}
	return rss, cpu
}

// idle measures noopInterval of procs running with nothing to do.
func idle(t testing.TB, c *benchCluster, procs ...*process) fleetStep {
	_, before := sample(procs...)
	s := fleetStep{step: "no-op " + secs(noopInterval) + ": requests sent"}
	s.measurement = c.measure(t, nil, func() error {
		time.Sleep(noopInterval)
		for _, p := range procs {
			if err := p.running(); err != nil {
				return err
			}
		}
		return nil
	})
	var cpu cpuTimes
	s.rss, cpu = sample(procs...)
	s.cpu = cpu.minus(before)
	return s
}

// cairnFleetSteps runs B2's controller rows on f, then a no-op interval.
func cairnFleetSteps(f *fleetRun) []fleetStep {
	cold, c := f.coldController()
	change := f.changeOneController(c)
	noop := idle(f.t, f.c, c.process)
	c.stop()
	step := func(name string, r cliRun) fleetStep {
		return fleetStep{measurement: r.measurement, step: name,
			rss: map[string]int64{c.name: r.rss}, cpu: cpuTimes{c.name: r.cairnCPU}}
	}
	return []fleetStep{step("empty cluster → all Ready", cold), step("one app changed → Ready", change), noop}
}

// appendResult appends a line to results/<name>.md.
func appendResult(t *testing.T, name, line string) {
	f, err := os.OpenFile(filepath.Join("results", name+".md"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(f, "\n%s\n", line)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fluxFleet is the fleet of B6 synced by Flux on its own cluster.
type fluxFleet struct {
	t     *testing.T
	ctx   context.Context
	m     int
	c     *benchCluster
	repo  string // a Git working tree, served by url
	url   string
	first string
	procs []*process // source-controller, kustomize-controller
	// coldWall is how long the cold sync took: Flux applies every Kustomization
	// again at a new commit, so the wait for all M then is bounded from it.
	coldWall time.Duration
}

func newFluxFleet(t *testing.T, m int, dir string) *fluxFleet {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Minute)
	t.Cleanup(cancel)
	root := t.TempDir()
	f := &fluxFleet{t: t, ctx: ctx, m: m, c: startBenchCluster(t, true), repo: filepath.Join(root, "fleet")}
	f.url = newGitServer(t, root).URL + "/fleet"
	files := map[string]string{}
	for i := 1; i <= m; i++ {
		files[fluxAppFile(i)] = fluxApp(i, "6.7.0")
	}
	writeFiles(t, f.repo, files)
	gitRun(t, f.repo, "init", "--quiet", "--initial-branch=main")
	f.first = f.commit("initial: " + fmt.Sprint(m) + " apps")
	f.installFlux(dir)
	return f
}

func (f *fluxFleet) commit(msg string) string { return commitAll(f.t, f.repo, msg) }

// installFlux applies Flux's CRDs and its namespace, and starts both
// controllers, waiting until their workers run.
func (f *fluxFleet) installFlux(dir string) {
	t := f.t
	f.c.install(t, "Flux's CRDs", crdsAndNamespace(t, os.DirFS(dir), "crds", fluxNamespace))

	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	storage := fmt.Sprintf("127.0.0.1:%d", port)
	env := []string{"KUBECONFIG=" + f.c.Kubeconfig, "RUNTIME_NAMESPACE=" + fluxNamespace}
	f.procs = []*process{
		startProcess(t, f.ctx, "source-controller", env, filepath.Join(dir, "bin", "source-controller"),
			append(slices.Clone(fluxFlags), "--storage-path="+t.TempDir(), "--storage-addr="+storage, "--storage-adv-addr="+storage)...),
		startProcess(t, f.ctx, "kustomize-controller", env, filepath.Join(dir, "bin", "kustomize-controller"), fluxFlags...),
	}
	for i, kind := range []string{"gitrepository", "kustomization"} {
		f.awaitWorkers(f.procs[i], kind)
	}
}

// awaitWorkers waits until p logs that the workers of its controller of kind
// run.
func (f *fluxFleet) awaitWorkers(p *process, kind string) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for _, line := range strings.Split(p.output(), "\n") {
			if strings.Contains(line, "Starting workers") && strings.Contains(line, `"controller":"`+kind+`"`) {
				return
			}
		}
		if err := p.running(); err != nil {
			f.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: no workers for %s after 2 minutes: %s", p.name, kind, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// steps runs the cold sync, one change and a no-op interval, and stops Flux.
func (f *fluxFleet) steps() []fleetStep {
	cold := f.cold()
	changed, all := f.changeOne()
	noop := idle(f.t, f.c, f.procs...)
	for _, p := range f.procs {
		p.stop()
	}
	return []fleetStep{cold, changed, all, noop}
}

// cold creates the M Kustomizations (untimed), then the GitRepository, and
// times until every Kustomization is Ready at the first commit.
func (f *fluxFleet) cold() fleetStep {
	for i := 1; i <= f.m; i++ {
		if err := f.c.admin.Create(f.ctx, fluxKustomization(i)); err != nil {
			f.t.Fatal(err)
		}
	}
	s := fleetStep{step: "empty cluster → all Ready"}
	s.measurement = f.c.measure(f.t, nil, func() error {
		if err := f.c.admin.Create(f.ctx, f.gitRepository()); err != nil {
			return err
		}
		return f.awaitAll(f.first, 30*time.Minute)
	})
	s.rss, s.cpu = sample(f.procs...)
	f.coldWall = s.wall
	f.t.Logf("M=%d cold through Flux: %s, %s", f.m, secs(s.wall), s.server)
	return s
}

// awaitAll waits until a LIST (every second) finds all M Kustomizations
// Ready at sha.
func (f *fluxFleet) awaitAll(sha string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, err := f.readyAt(sha)
		if err != nil || n == f.m {
			return err
		}
		for _, p := range f.procs {
			if err := p.running(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Kustomizations Ready at %s after %s: %s\n%s", n, f.m, sha, limit, f.procs[0].tail(), f.procs[1].tail())
		}
		time.Sleep(time.Second)
	}
}

// readyAt counts the Kustomizations Ready with sha applied.
func (f *fluxFleet) readyAt(sha string) (int, error) {
	var list unstructured.UnstructuredList
	list.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	list.SetKind("KustomizationList")
	if err := f.c.admin.List(f.ctx, &list, client.InNamespace(fluxNamespace)); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if readyAtRevision(&list.Items[i], sha) {
			n++
		}
	}
	return n, nil
}

// readyAtRevision says a Kustomization is Ready with the commit sha applied.
func readyAtRevision(k *unstructured.Unstructured, sha string) bool {
	rev, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
	return rev == "main@sha1:"+sha && conditions.IsTrue(conditions.UnstructuredGetter(k), "Ready")
}

// changeOne commits a new image for the first app and times Flux until its
// Kustomization is Ready at the commit, then until all M are.
func (f *fluxFleet) changeOne() (changed, all fleetStep) {
	writeFiles(f.t, f.repo, map[string]string{fluxAppFile(1): fluxApp(1, "6.7.1")})
	_, name := fleetName(1)
	_, cpu0 := sample(f.procs...)
	var sha string
	changed = fleetStep{step: "one app changed → Ready"}
	changed.measurement = f.c.measure(f.t, nil, func() error {
		sha = f.commit("app-0001: podinfo 6.7.1")
		deadline := time.Now().Add(5 * time.Minute)
		for {
			k := fluxKustomization(1)
			if err := f.c.admin.Get(f.ctx, client.ObjectKey{Namespace: fluxNamespace, Name: name}, k); err != nil {
				return err
			}
			if readyAtRevision(k, sha) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not Ready at %s after 5 minutes: %s", name, sha, f.procs[1].tail())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	var cpu1, cpu2 cpuTimes
	changed.rss, cpu1 = sample(f.procs...)
	changed.cpu = cpu1.minus(cpu0)
	all = fleetStep{step: "… then all M Kustomizations Ready at the new commit (wall time from the commit)"}
	f.t.Logf("M=%d one changed through Flux: %s", f.m, secs(changed.wall))
	all.measurement = f.c.measure(f.t, nil, func() error { return f.awaitAll(sha, max(10*time.Minute, 3*f.coldWall/2)) })
	all.wall += changed.wall
	all.rss, cpu2 = sample(f.procs...)
	all.cpu = cpu2.minus(cpu1)
	f.t.Logf("M=%d all Kustomizations at the change through Flux: %s", f.m, secs(all.wall))
	return changed, all
}

func (f *fluxFleet) gitRepository() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": fluxSource, "namespace": fluxNamespace},
		"spec": map[string]any{
			"interval": controllerPoll.String(),
			"url":      f.url,
			"ref":      map[string]any{"branch": "main"},
			"timeout":  "60s",
		},
	}}
}

// fluxKustomization is the Kustomization of app i.
func fluxKustomization(i int) *unstructured.Unstructured {
	_, name := fleetName(i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": name, "namespace": fluxNamespace},
		"spec": map[string]any{
			"interval":  "60m",
			"path":      "./" + filepath.Dir(fluxAppFile(i)),
			"prune":     true,
			"wait":      true,
			"timeout":   "5m",
			"sourceRef": map[string]any{"kind": "GitRepository", "name": fluxSource},
		},
	}}
}

func fluxAppFile(i int) string {
	_, name := fleetName(i)
	return "apps/" + name + "/app.yaml"
}

// fluxApp is app i as plain manifests: its namespace and the 4 objects that
// fleetModule renders.
func fluxApp(i int, tag string) string {
	ns, name := fleetName(i)
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[2]s
  namespace: %[1]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  selector:
    app: %[2]s
  ports:
  - name: http
    port: 9898
    targetPort: http
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels:
      app: %[2]s
  template:
    metadata:
      labels:
        app: %[2]s
    spec:
      serviceAccountName: %[2]s
      containers:
      - name: app
        image: ghcr.io/stefanprodan/podinfo:%[3]s
        ports:
        - name: http
          containerPort: 9898
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  rules:
  - host: %[2]s.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: %[2]s
            port:
              name: http
`, ns, name, tag)
}

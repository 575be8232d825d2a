package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/manifests/controller"
)

// B2: M instances of Flux's benchmark app (a Deployment at 0 replicas, a
// ServiceAccount, a Service and an Ingress), each in its own namespace, synced
// by `cairn sync --once` run as a subprocess from a Git repository (file://)
// on a fresh cluster per M: time from an empty cluster to all Ready, peak
// RSS, then a commit that changes one instance. No Flux figure is printed: a
// comparison comes only from Flux run beside cairn in the same run (to come).

// fleetModule is the 4-object app.
const fleetModule = `package app

instance: {name: string, namespace: string}
values: {
	image: *"ghcr.io/stefanprodan/podinfo:6.7.0" | string
}
objects: {
	serviceAccount: {
		apiVersion: "v1"
		kind:       "ServiceAccount"
		metadata: name: instance.name
	}
	service: {
		apiVersion: "v1"
		kind:       "Service"
		metadata: name: instance.name
		spec: {
			selector: app: instance.name
			ports: [{name: "http", port: 9898, targetPort: "http"}]
		}
	}
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: 0
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: {
					serviceAccountName: instance.name
					containers: [{
						name:  "app"
						image: values.image
						ports: [{name: "http", containerPort: 9898}]
					}]
				}
			}
		}
	}
	ingress: {
		apiVersion: "networking.k8s.io/v1"
		kind:       "Ingress"
		metadata: name: instance.name
		spec: rules: [{
			host: "\(instance.name).example.com"
			http: paths: [{
				path:     "/"
				pathType: "Prefix"
				backend: service: {name: instance.name, port: name: "http"}
			}]
		}]
	}
}
`

const fleetModuleFile = `module: "cairn.dev/bench/app@v0"
language: version: "v0.17.0"
`

const (
	fleetTarget  = 60 * time.Second
	fleetTargetM = 1000
	rssTarget    = 200 << 20
	changeTarget = time.Second
)

func TestB2Fleet(t *testing.T) {
	sizes := pick([]int{100, 500, 1000}, []int{10})
	bin := buildCairn(t)
	tb := newTable("B2 fleet: M instances of the 4-object app, `cairn sync --once` (subprocess) from an empty cluster to all Ready, then one instance changed",
		"M", "step", "cairn wall time",
		"cairn peak RSS", "requests by verb (apiserver_request_total, all clients)", "API server mean latency", "CPU time (cairn; control plane)")
	for _, m := range sizes {
		t.Run(fmt.Sprintf("M=%d", m), func(t *testing.T) {
			f := newFleetRun(t, m, bin)
			cold := f.coldSync()
			change := f.changeOne()
			f.addRows(tb, cold, change)
		})
		t.Run(fmt.Sprintf("M=%d controller", m), func(t *testing.T) {
			f := newFleetRun(t, m, bin)
			cold, c := f.coldController()
			change := f.changeOneController(c)
			c.stop()
			f.addControllerRows(tb, "controller", cold, change)
		})
		t.Run(fmt.Sprintf("M=%d controller --shards 0", m), func(t *testing.T) {
			f := newFleetRun(t, m, bin)
			cold, c := f.coldController("--shards", "0")
			change := f.changeOneController(c)
			c.stop()
			f.addControllerRows(tb, "controller --shards 0 (the leader reconciles)", cold, change)
		})
	}
	tb.note("each instance in its own namespace (fleet-0001 …), which cairn creates: M namespaces, M ModuleInstances, 4·M objects; Deployments at 0 replicas must be Available (kube-controller-manager) for Ready")
	tb.note("one fresh cluster per M (etcd, kube-apiserver with --max-requests-inflight=3000 --max-mutating-requests-inflight=1000 --service-cluster-ip-range=10.96.0.0/16, kube-controller-manager, kube-scheduler, kwok), on the same 2 cores as cairn")
	tb.note("`cairn sync --repo file://… --branch main --once -q --drift-interval=0 --kubeconfig … --cache-dir <fresh>`: wall time of the process (start, clone, render, apply, health, status) and its peak RSS (VmHWM of /proc/<pid>/status, polled every 10 ms: ru_maxrss would report the test binary's peak, inherited across exec); all M ModuleInstances checked Ready by a LIST afterwards; the CLI has no concurrency flag: the engine's default (reconciler.DefaultOptions) applies")
	tb.note("one instance changed = a commit changing that instance's image; the CLI reads the last synced SHA from the Platform CR and diffs: only that instance is affected (checked: every other instance keeps its lastAppliedRevision)")
	tb.note("requests: apiserver_request_total deltas over the step, so they include kube-controller-manager, kube-scheduler and kwok; cairn's own requests are counted by a RoundTripper in the in-process profile below")
	tb.note("targets: %d instances Ready in under %s, peak RSS under %d MiB, one-instance change under %s", fleetTargetM, secs(fleetTarget), rssTarget>>20, secs(changeTarget))
	tb.note("controller rows: the same fleet on a fresh cluster of its own, one `cairn controller --interval %s --drift-interval %s` process (no leader election, metrics and probes off) started on the empty cluster; cold = from its start until a watch of the ModuleInstances sees the last of the M become Ready at the first commit (a LIST every second, before 2026-12-03 07:00, was late by up to a second and loaded the API server); one change = committed while the controller's log says a drift check of the whole fleet is in flight, from the commit until the changed instance is Ready at it (a GET every 50 ms), every other instance checked unchanged (the sync interrupts the drift check, which goes on afterwards); CPU and RSS are the process's so far (it keeps running); the process runs with GOMEMLIMIT=%s, as the Deployment sets it (manifests/controller), where the CLI runs without", controllerPoll, controllerDrift, controller.GoMemLimit())
	tb.note("controller rows run the default, one shard: the leader runs the revision step and the instance reconciles run on the controller's queue, each from its CR (docs/architecture.md, steps 7, 8 and 12); controller --shards 0 rows: the leader reconciles every instance in its sync, as the CLI does")
	tb.note("engine: %s", engineRevision(t))
	if bin := os.Getenv("CAIRN_BENCH_CAIRN"); bin != "" {
		tb.note("the CLI and controller rows ran the binary %s ($CAIRN_BENCH_CAIRN), the in-process profile this tree's engine", bin)
	}
	prof := profileFleet(t, pick(500, 10))
	reportTables(t, "B2", tb, prof)
}

// buildCairn builds bin/cairn into a temporary directory, or returns
// $CAIRN_BENCH_CAIRN: a binary built elsewhere (another commit's engine, measured
// by this commit's benchmark for a same-run baseline).
func buildCairn(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CAIRN_BENCH_CAIRN"); bin != "" {
		abs, err := filepath.Abs(bin) // the processes run in other directories
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "cairn")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/cairn")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("failed to build cairn: %v\n%s", err, out)
	}
	return bin
}

// engineRevision names the commit the benchmark ran on, and whether the engine
// had uncommitted changes.
func engineRevision(t *testing.T) string {
	head, err := gitOutput("../..", "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "unknown commit"
	}
	if dirty, _ := gitOutput("../..", "status", "--porcelain", "--", "reconciler", "render", "gitsource", "cmd/cairn"); dirty != "" {
		return fmt.Sprintf("commit %s with uncommitted changes in reconciler/, render/, gitsource/ or cmd/cairn/", head)
	}
	return "commit " + head
}

// fleetRun is one M of B2 on its own cluster.
type fleetRun struct {
	t     *testing.T
	g     *WithT
	ctx   context.Context
	m     int
	bin   string
	c     *benchCluster
	repo  string // a Git working tree, served as file://
	cache string
	first string // the SHA of the first sync
}

func newFleetRun(t *testing.T, m int, bin string) *fleetRun {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	t.Cleanup(cancel)
	f := &fleetRun{t: t, g: NewWithT(t), ctx: ctx, m: m, bin: bin, c: startBenchCluster(t, true),
		repo: filepath.Join(t.TempDir(), "platform"), cache: t.TempDir()}
	writeFleetRepo(t, f.repo, m)
	gitRun(t, f.repo, "init", "--quiet", "--initial-branch=main")
	f.first = f.commit("initial: " + fmt.Sprint(m) + " instances")
	return f
}

// writeFleetRepo writes the Platform, the app module and m instance files.
func writeFleetRepo(t testing.TB, dir string, m int) {
	files := map[string]string{
		"platform.yaml":                  platformYAML,
		"modules/app/app.cue":            fleetModule,
		"modules/app/cue.mod/module.cue": fleetModuleFile,
	}
	for i := 1; i <= m; i++ {
		files[fleetFile(i)] = fleetInstance(i, "6.7.0")
	}
	writeFiles(t, dir, files)
}

func fleetName(i int) (ns, name string) {
	return fmt.Sprintf("fleet-%04d", i), fmt.Sprintf("app-%04d", i)
}

func fleetFile(i int) string {
	_, name := fleetName(i)
	return "instances/" + name + ".yaml"
}

func fleetInstance(i int, tag string) string {
	ns, name := fleetName(i)
	return fmt.Sprintf(`apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: %s
  namespace: %s
spec:
  module:
    local:
      path: ./modules/app
  timeout: 5m
  values:
    image: ghcr.io/stefanprodan/podinfo:%s
`, name, ns, tag)
}

func (f *fleetRun) commit(msg string) string { return commitAll(f.t, f.repo, msg) }

// commitAll commits everything in the working tree repo and returns the SHA.
func commitAll(t testing.TB, repo, msg string) string {
	t.Helper()
	gitRun(t, repo, "add", "-A")
	gitRun(t, repo, "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "--quiet", "-m", msg)
	return gitRun(t, repo, "rev-parse", "HEAD")
}

// cliRun is one measured `cairn sync --once`.
type cliRun struct {
	measurement
	rss      int64 // bytes
	cairnCPU time.Duration
}

// syncCLI runs `cairn sync --once` and measures it.
func (f *fleetRun) syncCLI() cliRun {
	f.t.Helper()
	var run cliRun
	run.measurement = f.c.measure(f.t, nil, func() error {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(f.ctx, f.bin, "sync", "--repo", "file://"+f.repo, "--branch", "main", "--once", "-q",
			"--drift-interval=0", "--kubeconfig", f.c.Kubeconfig, "--cache-dir", f.cache)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan struct{})
		peak := watchPeakRSS(cmd.Process.Pid, done)
		err := cmd.Wait()
		close(done)
		run.rss = <-peak
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			run.cairnCPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
		}
		if err != nil {
			return fmt.Errorf("cairn sync: %w\n%s\n%s", err, tail(stdout.String(), 20), tail(stderr.String(), 20))
		}
		return nil
	})
	return run
}

// watchPeakRSS polls the VmHWM (peak resident set) of pid every 10 ms until
// done is closed, then sends the largest value seen, in bytes. getrusage's
// ru_maxrss cannot be used: os/exec starts the child with CLONE_VM, and Linux
// carries the parent's high-water mark (the test binary's) across execve
// into the child's ru_maxrss.
func watchPeakRSS(pid int, done <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, vmHWM(pid))
			select {
			case <-done:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// vmHWM reads the peak resident set of a live process from /proc, in bytes.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = append([]string{"…"}, l[len(l)-lines:]...)
	}
	return strings.Join(l, "\n")
}

// coldSync syncs the fleet into the empty cluster and checks every instance
// is Ready at the first commit with its Deployment.
func (f *fleetRun) coldSync() cliRun {
	run := f.syncCLI()
	f.t.Logf("M=%d cold: %s, RSS %s, CPU %s, %s", f.m, secs(run.wall), byteSize(run.rss), cpuSummary(run), run.server)
	mis := f.instances()
	f.g.Expect(mis).To(HaveLen(f.m))
	for _, mi := range mis {
		f.g.Expect(conditions.IsTrue(&mi, "Ready")).To(BeTrue(), "%s/%s: %s", mi.Namespace, mi.Name, conditions.GetMessage(&mi, "Ready"))
		f.g.Expect(mi.Status.LastAppliedRevision).To(Equal(f.first))
	}
	var deps appsv1.DeploymentList
	f.g.Expect(f.c.admin.List(f.ctx, &deps, client.MatchingLabels{cairnv1.ManagedByLabel: cairnv1.ManagedByValue})).To(Succeed())
	f.g.Expect(deps.Items).To(HaveLen(f.m))
	return run
}

// changeOne commits a new image for the first instance and syncs again: only
// that instance may be applied.
func (f *fleetRun) changeOne() cliRun {
	writeFiles(f.t, f.repo, map[string]string{fleetFile(1): fleetInstance(1, "6.7.1")})
	sha := f.commit("app-0001: podinfo 6.7.1")
	run := f.syncCLI()
	f.t.Logf("M=%d one changed: %s, %s", f.m, secs(run.wall), run.server)
	changedNS, changed := fleetName(1)
	for _, mi := range f.instances() {
		want := f.first
		if mi.Name == changed {
			want = sha
		}
		f.g.Expect(conditions.IsTrue(&mi, "Ready")).To(BeTrue(), "%s/%s", mi.Namespace, mi.Name)
		f.g.Expect(mi.Status.LastAppliedRevision).To(Equal(want), "%s/%s", mi.Namespace, mi.Name)
	}
	var dep appsv1.Deployment
	f.g.Expect(f.c.admin.Get(f.ctx, client.ObjectKey{Namespace: changedNS, Name: changed}, &dep)).To(Succeed())
	f.g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(HaveSuffix(":6.7.1"))
	return run
}

func (f *fleetRun) instances() []cairnv1.ModuleInstance {
	f.t.Helper()
	var mis cairnv1.ModuleInstanceList
	f.g.Expect(f.c.admin.List(f.ctx, &mis)).To(Succeed())
	return mis.Items
}

func (f *fleetRun) addRows(tb *table, cold, change cliRun) {
	coldVerdict := ""
	if f.m == fleetTargetM {
		coldVerdict = " (target <" + secs(fleetTarget) + ": " + verdict(cold.wall < fleetTarget) + ")"
	}
	tb.add(f.m, "empty cluster → all Ready", secs(cold.wall)+coldVerdict,
		byteSize(cold.rss)+" ("+verdict(cold.rss < rssTarget)+")", cold.server, cold.server.latencies(), cpuSummary(cold))
	tb.add(f.m, "one instance changed → Ready", secs(change.wall)+" ("+verdict(change.wall < changeTarget)+")",
		byteSize(change.rss), change.server, change.server.latencies(), cpuSummary(change))
}

func cpuSummary(r cliRun) string {
	return fmt.Sprintf("cairn %.1f s; %s", r.cairnCPU.Seconds(), r.cpu)
}

// reportTables prints the tables and, in bench mode, writes them together to
// results/<name>.md.
func reportTables(t *testing.T, name string, tables ...*table) {
	t.Helper()
	var b strings.Builder
	for i, tb := range tables {
		if i > 0 {
			b.WriteString("\n")
		}
		s := tb.String()
		if !benchMode() {
			s = strings.Replace(s, "\n\n", " (quick run: set CAIRN_BENCH=1 for the real figures)\n\n", 1)
		}
		b.WriteString(s)
	}
	printMu.Lock()
	fmt.Println("\n" + b.String())
	printMu.Unlock()
	if !benchMode() {
		return
	}
	if err := os.MkdirAll("results", 0o755); err != nil {
		t.Fatal(err)
	}
	header := fmt.Sprintf("<!-- %s, %s, written by `make bench` -->\n\n", time.Now().UTC().Format(time.RFC3339), machine())
	if err := os.WriteFile(filepath.Join("results", name+".md"), []byte(header+b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

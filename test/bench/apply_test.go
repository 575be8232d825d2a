package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// B1: one ModuleInstance whose local CUE module renders N objects, synced by
// the engine in-process: cold apply, re-syncs, one object changed, half
// pruned; against `kubectl apply --server-side` of the same rendered objects
// in another namespace of the same cluster. Each phase is timed and its API
// requests counted by verb, by a RoundTripper around the engine's clients and
// by the API server's apiserver_request_total.

// benchModule renders values.count objects: ConfigMaps, or with values.mix a
// rotation of ConfigMap, Service and ServiceAccount. Object 0 is a ConfigMap
// carrying values.rev, so changing rev changes exactly one object. Each kind
// has its own comprehension over a strided range: a conditional field in
// every iteration (`for i in ... { if mod(i, 3) == 0 {...} }`) makes CUE
// v0.17's evaluation quadratic (2000 objects: 5.6 s in `cue export` against
// 0.2 s this way).
const benchModule = `package bench

import "list"

instance: {name: string, namespace: string}
values: {
	count: int & >=0
	mix:   *false | bool
	rev:   *"1" | string
}
_step: [if values.mix {3}, 1][0]
objects: {
	for i in list.Range(0, values.count, _step) {
		"cm-\(i)": {
			apiVersion: "v1"
			kind:       "ConfigMap"
			metadata: name: "\(instance.name)-\(i)"
			data: {
				index: "\(i)"
				if i == 0 {rev: values.rev}
			}
		}
	}
	if values.mix {
		for i in list.Range(1, values.count, 3) {
			"svc-\(i)": {
				apiVersion: "v1"
				kind:       "Service"
				metadata: name: "\(instance.name)-\(i)"
				spec: {
					selector: app: "\(instance.name)-\(i)"
					ports: [{name: "http", port: 80, targetPort: 8080}]
				}
			}
		}
		for i in list.Range(2, values.count, 3) {
			"sa-\(i)": {
				apiVersion: "v1"
				kind:       "ServiceAccount"
				metadata: name: "\(instance.name)-\(i)"
			}
		}
	}
}
`

const benchModuleFile = `module: "cairn.dev/bench/objects@v0"
language: version: "v0.17.0"
`

// b1SetLabel marks the objects kubectl applies and prunes.
const b1SetLabel = "bench.cairn.dev/set"

type b1Case struct {
	n   int
	mix bool
}

func (bc b1Case) kinds() string {
	if bc.mix {
		return "ConfigMap/Service/ServiceAccount"
	}
	return "ConfigMap"
}

// resources are the API resources of the rendered objects.
func (bc b1Case) resources() []string {
	if bc.mix {
		return []string{"configmaps", "services", "serviceaccounts"}
	}
	return []string{"configmaps"}
}

func TestB1Apply(t *testing.T) {
	cases := pick([]b1Case{{n: 100}, {n: 1000}, {n: 5000}, {n: 1000, mix: true}}, []b1Case{{n: 20}})
	tb := newTable("B1 apply: one instance of N objects, cairn engine (in-process) vs `kubectl apply --server-side`",
		"N", "kinds", "phase", "tool", "wall time", "requests by verb (client RoundTripper)",
		"requests by verb (apiserver_request_total)", "time ÷ kubectl's", "object requests ÷ kubectl's")
	for _, bc := range cases {
		t.Run(fmt.Sprintf("N=%d-%s", bc.n, strings.ReplaceAll(bc.kinds(), "/", "-")), func(t *testing.T) {
			b := newB1Run(t, bc)
			phases := b.run()
			for _, p := range phases {
				b.addRows(tb, p)
			}
			tb.note("N=%d %s: render alone (render.Renderer, untimed above) %s; cluster started in %s; cairn's last-phase requests by resource: %s",
				bc.n, bc.kinds(), ms(b.renderTime), secs(b.c.started), phases[len(phases)-1].cairn.client.resources())
		})
	}
	tb.note("one fresh cluster (etcd, kube-apiserver only: no controllers, so apiserver_request_total counts only the engine, kubectl and the API server's own few loopback requests) per N; cairn syncs namespace b1-cairn, kubectl applies the same rendered objects (plus a `%s` label) to b1-kubectl", b1SetLabel)
	tb.note("cairn: reconciler.Engine in-process with reconciler.DefaultOptions (concurrency %d instances; the engine sends up to 16 applies of one instance at once), a directory revision per phase, client QPS unlimited as the CLI's; time includes reading the directory, render (cached when values are unchanged), apply, inventory, health wait and status", b1Concurrency)
	tb.note("client counts include the engine's own objects (Platform, ModuleInstance and its status, the inventory Secret beyond 500 objects, the namespace) and `discovery` (requests naming no resource, left out of the server column)")
	tb.note("phases: cold = empty namespace; unchanged = the same directory again (instance not affected: plan only); no-op = the instance file changes `timeout: 60s` to `61s` (spec digest changes, the render does not: instance affected, nothing to apply); one changed = values.rev changes, which changes object 0 only; half pruned = values.count N → N/2 (Platform without prune limits); kubectl re-applies the whole file in each phase")
	tb.note("kubectl 1.37 refuses `--prune` with `--server-side` (\"--prune is in alpha and doesn't currently work on objects created by server-side apply\"), so its prune baseline is an ApplySet: `KUBECTL_APPLYSET=true kubectl apply --server-side --force-conflicts -n %s --prune --applyset=b1 -f`, cold (N objects) then N/2, in a third namespace; it deletes 5 objects a second (client-go's default client-side limit, QPS 5), so it is skipped above %d deletions", b1ApplySet, kubectlPruneMax)
	tb.note("contract (asserted): the no-op re-sync sends 0 server-side apply requests for the rendered objects, one changed object sends exactly 1")
	tb.report(t, "B1")
}

// b1Run is one size of B1 on its own cluster.
type b1Run struct {
	t          *testing.T
	g          *WithT
	ctx        context.Context
	bc         b1Case
	c          *benchCluster
	rc         *requestCounter
	engine     *reconciler.Engine
	dir        string // the platform repository
	tmp        string
	kubectl    string
	renderTime time.Duration
	// applySetCold is kubectl's cold apply as an ApplySet, before its prune.
	applySetCold *measurement

	timeout string // the instance's spec.timeout
	rev     string // values.rev
	count   int    // values.count
}

// kubectlPruneMax bounds the objects the kubectl baseline prunes: its
// ApplySet prune deletes 5 objects a second (client-go's default QPS of 5),
// so 2500 deletions would take over 8 minutes.
const kubectlPruneMax = 1000

// b1Concurrency is the engine's concurrency in the last run, for the notes.
var b1Concurrency int

const (
	b1Cairn    = "b1-cairn"
	b1Kubectl  = "b1-kubectl"
	b1ApplySet = "b1-kubectl-applyset"
)

func newB1Run(t *testing.T, bc b1Case) *b1Run {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	b := &b1Run{t: t, g: NewWithT(t), ctx: ctx, bc: bc, c: startBenchCluster(t, false), rc: newRequestCounter(),
		tmp: t.TempDir(), timeout: "60s", rev: "1", count: bc.n}
	b.kubectl = b.c.KubectlPath()
	b.dir = filepath.Join(b.tmp, "repo")
	writeFiles(t, b.dir, map[string]string{
		"platform.yaml":                    platformYAML,
		"modules/bench/bench.cue":          benchModule,
		"modules/bench/cue.mod/module.cue": benchModuleFile,
	})
	cl, err := reconciler.NewCluster(b.c.countedConfig(b.rc))
	b.g.Expect(err).NotTo(HaveOccurred())
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(b.tmp, "cache")
	opts.RenderLimits.Timeout = 5 * time.Minute
	r := render.NewRenderer()
	t.Cleanup(func() { _ = r.Close() })
	b.engine = reconciler.New(cl, r, opts)
	b1Concurrency = opts.Concurrency
	return b
}

// b1Phase is one phase measured for cairn and, when it has one, kubectl.
type b1Phase struct {
	name       string
	cairn      measurement
	kubectl    *measurement
	cairnApply int // server-side applies of rendered objects by cairn
}

func (b *b1Run) run() []b1Phase {
	n, half := b.bc.n, b.bc.n/2
	var phases []b1Phase
	cold := b.cairnPhase("cold apply", func() { b.writeInstance() }, n)
	b.expectSync(cold.res, "Created", n, 0)
	phases = append(phases, cold.b1Phase)

	unchanged := b.cairnPhase("unchanged revision", func() {}, n)
	b.g.Expect(unchanged.res.Action).To(BeEquivalentTo("Unchanged"), unchanged.res.Message)
	phases = append(phases, unchanged.b1Phase)

	noop := b.cairnPhase("no-op re-sync", func() { b.timeout = "61s"; b.writeInstance() }, n)
	b.expectSync(noop.res, "Updated", 0, 0)
	b.g.Expect(noop.cairnApply).To(BeZero(),
		"a no-op re-sync must send no apply request for the rendered objects; it sent: %s", noop.cairn.client.resources())
	phases = append(phases, noop.b1Phase)

	one := b.cairnPhase("one object changed", func() { b.rev = "2"; b.writeInstance() }, n)
	b.expectSync(one.res, "Updated", 1, 0)
	b.g.Expect(one.cairnApply).To(Equal(1),
		"one changed object must cost exactly one apply request; sent: %s", one.cairn.client.resources())
	b.expectRev("2")
	phases = append(phases, one.b1Phase)

	pruned := b.cairnPhase("half pruned", func() { b.count = half; b.writeInstance() }, half)
	b.expectSync(pruned.res, "Updated", 0, n-half)
	phases = append(phases, pruned.b1Phase)

	b.kubectlPhases(phases)
	return phases
}

// cairnResult is a measured cairn phase with the instance's result.
type cairnResult struct {
	b1Phase
	res reconciler.InstanceResult
}

// cairnPhase edits the repository, syncs it once, and checks that the
// namespace then holds want rendered objects.
func (b *b1Run) cairnPhase(name string, edit func(), want int) cairnResult {
	b.t.Helper()
	edit()
	var res *reconciler.SyncResult
	m := b.c.measure(b.t, b.rc, func() error {
		var err error
		res, err = b.sync()
		return err
	})
	b.g.Expect(res.Error).NotTo(HaveOccurred())
	b.g.Expect(res.Instances).To(HaveLen(1))
	b.g.Expect(res.Instances[0].Ready).To(BeTrue(), "%s: %s", res.Instances[0].Reason, res.Instances[0].Message)
	b.g.Expect(b.countObjects(b1Cairn, client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(b1Cairn, "b1")})).
		To(Equal(want), "objects in %s after %s", b1Cairn, name)
	b.t.Logf("cairn %s: %s, %s", name, secs(m.wall), m.client)
	return cairnResult{
		b1Phase: b1Phase{name: name, cairn: m, cairnApply: m.client.verb("PATCH-apply", b.bc.resources()...)},
		res:     res.Instances[0],
	}
}

func (b *b1Run) sync() (*reconciler.SyncResult, error) {
	tree, err := gitsource.ReadDir(b.dir, gitsource.DefaultLimits())
	if err != nil {
		return nil, err
	}
	sha := "dir:" + strings.TrimPrefix(tree.Digest(), "sha256:")[:12]
	return b.engine.Sync(b.ctx, reconciler.Revision{SHA: sha, Tree: tree})
}

func (b *b1Run) expectSync(res reconciler.InstanceResult, action string, applied, pruned int) {
	b.t.Helper()
	b.g.Expect(res.Ready).To(BeTrue(), "%s: %s", res.Reason, res.Message)
	b.g.Expect(res.Action).To(BeEquivalentTo(action), res.Message)
	b.g.Expect(res.Applied).To(Equal(applied), res.Message)
	b.g.Expect(res.Pruned).To(Equal(pruned), res.Message)
}

// expectRev checks that object 0 carries values.rev in both namespaces.
func (b *b1Run) expectRev(rev string) {
	b.t.Helper()
	cm := &corev1.ConfigMap{}
	b.g.Expect(b.c.admin.Get(b.ctx, client.ObjectKey{Namespace: b1Cairn, Name: "b1-0"}, cm)).To(Succeed())
	b.g.Expect(cm.Data["rev"]).To(Equal(rev))
}

func (b *b1Run) writeInstance() {
	writeFiles(b.t, b.dir, map[string]string{"instances/b1.yaml": b.instanceYAML()})
}

func (b *b1Run) instanceYAML() string {
	return fmt.Sprintf(`apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: b1
  namespace: %s
spec:
  module:
    local:
      path: ./modules/bench
  timeout: %s
  values:
    count: %d
    mix: %t
    rev: %q
`, b1Cairn, b.timeout, b.count, b.bc.mix, b.rev)
}

// countObjects counts the objects of the case's kinds in ns matching sel.
func (b *b1Run) countObjects(ns string, sel client.MatchingLabels) int {
	b.t.Helper()
	n := 0
	for _, kind := range strings.Split(b.bc.kinds(), "/") {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind(kind + "List")
		b.g.Expect(b.c.admin.List(b.ctx, l, client.InNamespace(ns), sel)).To(Succeed())
		n += len(l.Items)
	}
	return n
}

// kubectlPhases runs the baseline for the phases that have one. kubectl 1.37
// refuses `--prune` with `--server-side` ("--prune is in alpha and doesn't
// currently work on objects created by server-side apply"), so the prune
// baseline is an ApplySet (KUBECTL_APPLYSET=true, --applyset --prune) in a
// third namespace, whose cold apply is timed too.
func (b *b1Run) kubectlPhases(phases []b1Phase) {
	n, half := b.bc.n, b.bc.n/2
	all := b.renderForKubectl(b1Kubectl, n, "1")
	changed := b.renderForKubectl(b1Kubectl, n, "2")
	setAll := b.renderForKubectl(b1ApplySet, n, "2")
	setHalf := b.renderForKubectl(b1ApplySet, half, "2")
	for _, name := range []string{b1Kubectl, b1ApplySet} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		b.g.Expect(b.c.admin.Create(b.ctx, ns)).To(Succeed())
	}
	set := []string{"-n", b1ApplySet, "--prune", "--applyset=b1"}
	runs := map[string]func() *measurement{
		"cold apply":         func() *measurement { return b.kubectlApply(b1Kubectl, all, n) },
		"no-op re-sync":      func() *measurement { return b.kubectlApply(b1Kubectl, all, n) },
		"one object changed": func() *measurement { return b.kubectlApply(b1Kubectl, changed, n) },
		"half pruned": func() *measurement {
			if n-half > kubectlPruneMax {
				return nil
			}
			b.applySetCold = b.kubectlApply(b1ApplySet, setAll, n, set...)
			return b.kubectlApply(b1ApplySet, setHalf, half, set...)
		},
	}
	for i := range phases {
		if run := runs[phases[i].name]; run != nil {
			phases[i].kubectl = run()
		}
	}
}

// renderForKubectl renders the module once with render.Renderer (the engine's
// renderer) and writes the objects as one YAML file in the kubectl namespace.
func (b *b1Run) renderForKubectl(ns string, count int, rev string) string {
	b.t.Helper()
	tree, err := gitsource.ReadDir(b.dir, gitsource.DefaultLimits())
	b.g.Expect(err).NotTo(HaveOccurred())
	values, _ := json.Marshal(map[string]any{"count": count, "mix": b.bc.mix, "rev": rev})
	r := render.NewRenderer()
	defer r.Close()
	start := time.Now()
	res, err := r.Render(b.ctx, render.Request{Name: "b1", Namespace: ns, Source: tree, LocalPath: "modules/bench",
		Values: values, Limits: render.Limits{Timeout: 5 * time.Minute}})
	if ns == b1Kubectl && count == b.bc.n && rev == "1" {
		b.renderTime = time.Since(start)
	}
	b.g.Expect(err).NotTo(HaveOccurred())
	b.g.Expect(res.Objects).To(HaveLen(count))
	var buf bytes.Buffer
	for _, u := range res.Objects {
		u.SetNamespace(ns)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[b1SetLabel] = "b1"
		u.SetLabels(labels)
		y, err := yaml.Marshal(u.Object)
		b.g.Expect(err).NotTo(HaveOccurred())
		buf.WriteString("---\n")
		buf.Write(y)
	}
	path := filepath.Join(b.tmp, fmt.Sprintf("%s-%d-%s.yaml", ns, count, rev))
	b.g.Expect(os.WriteFile(path, buf.Bytes(), 0o644)).To(Succeed())
	return path
}

// kubectlApply runs `kubectl apply --server-side --force-conflicts -f file`
// (with extra args) and checks that ns then holds want objects.
func (b *b1Run) kubectlApply(ns, file string, want int, extra ...string) *measurement {
	b.t.Helper()
	args := append([]string{"--kubeconfig", b.c.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", file}, extra...)
	m := b.c.measure(b.t, nil, func() error {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(b.ctx, b.kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECTL_APPLYSET=true")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return nil
	})
	b.g.Expect(b.countObjects(ns, client.MatchingLabels{b1SetLabel: "b1"})).To(Equal(want), "objects in %s after kubectl %v", ns, extra)
	b.t.Logf("kubectl %s %v: %s, %s", ns, extra, secs(m.wall), m.server)
	return &m
}

// addRows adds the cairn row and the kubectl row of a phase.
func (b *b1Run) addRows(tb *table, p b1Phase) {
	kind := b.bc.kinds()
	cairnVsKubectl, reqVsKubectl := "n/a", "n/a"
	if p.kubectl != nil {
		cairnVsKubectl = fmt.Sprintf("%.2f", p.cairn.wall.Seconds()/p.kubectl.wall.Seconds())
		reqVsKubectl = fmt.Sprintf("%d ÷ %d", b.objectRequests(p.cairn.server), b.objectRequests(p.kubectl.server))
	}
	tb.add(b.bc.n, kind, p.name, "cairn", secs(p.cairn.wall), p.cairn.client, p.cairn.server, cairnVsKubectl, reqVsKubectl)
	if p.name == "half pruned" && b.applySetCold != nil {
		tb.add(b.bc.n, kind, "(cold apply as an ApplySet)", "kubectl", secs(b.applySetCold.wall), "(other process)", b.applySetCold.server, "", "")
	}
	if p.kubectl != nil {
		tb.add(b.bc.n, kind, p.name, "kubectl", secs(p.kubectl.wall), "(other process)", p.kubectl.server, "1", "")
	}
}

// objectRequests counts the server-side requests to the rendered objects'
// resources.
func (b *b1Run) objectRequests(rc requestCounts) int {
	n := 0
	for k, v := range rc.byResource {
		_, res, _ := strings.Cut(k, " ")
		for _, r := range b.bc.resources() {
			if res == r {
				n += v
			}
		}
	}
	return n
}

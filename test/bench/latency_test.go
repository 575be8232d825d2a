package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource/forge"
	giteaharness "cairn.dev/cairn/test/forge"

	"cairn.dev/cairn/test/harness"
)

// B6: the latency of the forge loop. A commit pushed to a real Gitea (git push
// over HTTP with go-git) reaches `cairn sync` (subprocess) through the webhook,
// which fetches, renders, applies and waits for health; the clock runs from the
// start of the push until a watch on the ModuleInstance sees
// status.lastAppliedRevision == the pushed SHA with Ready=True. The same change
// is then timed with two baselines in the same run, on the same cluster, repository
// and instance: the poll-only loop at a 1 s interval (no webhook), and a plain
// `cairn sync --once` started as soon as the push returns.

// latencyModule is one instance's app: a Deployment (kept Available) and a
// ConfigMap whose value each push changes.
const latencyModule = `package app

instance: {name: string, namespace: string}
values: {
	value: string
}
objects: {
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: 1
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: containers: [{name: "app", image: "ghcr.io/stefanprodan/podinfo:6.7.0"}]
			}
		}
	}
	config: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: instance.name
		data: value: values.value
	}
}
`

const (
	latencyNamespace = "b6"
	latencyInstance  = "app"
	latencyFile      = "instances/app.yaml"
	pollInterval     = time.Second
)

func latencyInstanceYAML(value string) string {
	return fmt.Sprintf(`apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: %s
  namespace: %s
spec:
  module:
    local:
      path: ./modules/app
  timeout: 2m
  values:
    value: %q
`, latencyInstance, latencyNamespace, value)
}

// latencyMode is one way of getting a push applied.
type latencyMode struct {
	name, trigger string
	// controller runs `cairn controller` (one replica) instead of `cairn sync`.
	controller bool
	// args are the flags of a long-running `cairn sync` (nil: `--once` per push).
	args func(r *latencyRun) []string
}

var latencyModes = []latencyMode{
	{name: "webhook", trigger: "Gitea push webhook → `cairn sync --interval 10m --listen …`",
		args: func(r *latencyRun) []string {
			return []string{"--interval", "10m", "--listen", r.addr, "--webhook-secret-file", r.secretFile}
		}},
	{name: "controller webhook", trigger: "Gitea push webhook → `cairn controller --interval 10m --webhook-bind-address …` (one replica, the manager's watches on)",
		controller: true,
		args: func(r *latencyRun) []string {
			return []string{"--interval", "10m", "--webhook-bind-address", r.addr, "--webhook-secret-file", r.secretFile,
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
		}},
	{name: "poll 1 s", trigger: "`cairn sync --interval 1s` (no webhook): ls-remote every second",
		args: func(r *latencyRun) []string { return []string{"--interval", pollInterval.String()} }},
	{name: "--once after push", trigger: "`cairn sync --once` started when the push returns (warm --cache-dir)"},
}

func TestB6Latency(t *testing.T) {
	n := pick(20, 3)
	r := newLatencyRun(t)
	tb := newTable("B6 latency: git push to Gitea → cairn → applied and Ready (lastAppliedRevision = pushed SHA, Ready=True)",
		"mode", "trigger", "pushes", "p50", "p95", "min", "max", "p50 from the push's return", "webhook faster by (p50)")
	results := map[string]latencies{}
	for _, m := range latencyModes {
		results[m.name] = r.measure(m, n)
	}
	delivery := r.measureDelivery(n)
	hook := results["webhook"].total
	for _, m := range latencyModes {
		s := results[m.name].total
		speedup := "—"
		if m.name != "webhook" {
			speedup = ratio(float64(percentile(s, 50)), float64(percentile(hook, 50)))
		}
		tb.add(m.name, m.trigger, len(s), ms(percentile(s, 50)), ms(percentile(s, 95)), ms(slices.Min(s)), ms(slices.Max(s)),
			ms(percentile(results[m.name].afterPush, 50)), speedup)
	}
	r.notes(tb, results, delivery)
	tb.report(t, "B6")
	r.g.Expect(percentile(hook, 95)).To(BeNumerically("<", 10*time.Second), "a webhook push must be applied within seconds")
}

// latencies are one mode's timings: from the start of the push, and from its
// return.
type latencies struct {
	total, afterPush samples
}

// latencyRun is B6's cluster, Gitea, repository and cairn binary.
type latencyRun struct {
	t     *testing.T
	g     *WithT
	ctx   context.Context
	c     *benchCluster
	watch client.WithWatch
	bin   string
	gitea *giteaharness.Gitea
	repo  forge.RepoRef
	clone *git.Repository
	fs    billy.Filesystem
	auth  *githttp.BasicAuth
	dir   string

	addr, secretFile, tokenFile string
	pushes                      int
	pushTimes                   samples // how long each push took
}

func newLatencyRun(t *testing.T) *latencyRun {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	r := &latencyRun{t: t, g: NewWithT(t), ctx: ctx, bin: buildCairn(t), c: startBenchCluster(t, true), dir: t.TempDir(), fs: memfs.New()}
	scheme := runtime.NewScheme()
	r.g.Expect(cairnv1.AddToScheme(scheme)).To(Succeed())
	var err error
	r.watch, err = client.NewWithWatch(r.c.RESTConfig, client.Options{Scheme: scheme})
	r.g.Expect(err).NotTo(HaveOccurred())
	r.startGitea()
	r.writeSecrets()
	return r
}

// startGitea starts Gitea, creates the repository with the module, the Platform and
// the instance, and points the repository's push webhook at r.addr.
func (r *latencyRun) startGitea() {
	var err error
	r.gitea, err = giteaharness.StartGitea(r.ctx, filepath.Join(r.dir, "gitea"))
	r.g.Expect(err).NotTo(HaveOccurred(), "B6 needs a real Gitea; it never skips")
	r.t.Cleanup(r.gitea.Stop)
	r.repo, err = r.gitea.CreateRepo(r.ctx, "platform")
	r.g.Expect(err).NotTo(HaveOccurred())
	r.auth = &githttp.BasicAuth{Username: r.gitea.AdminUser, Password: r.gitea.Token}
	r.clone, err = git.Clone(memory.NewStorage(), r.fs, &git.CloneOptions{URL: r.gitURL(), Auth: r.auth})
	r.g.Expect(err).NotTo(HaveOccurred())
	r.push(map[string]string{
		"platform.yaml":                  platformYAML,
		"modules/app/app.cue":            latencyModule,
		"modules/app/cue.mod/module.cue": "module: \"cairn.dev/bench/latency@v0\"\nlanguage: version: \"v0.17.0\"\n",
		latencyFile:                      latencyInstanceYAML("initial"),
	})
	r.addr = freeAddr(r.t)
	r.g.Expect(r.gitea.AddWebhook(r.ctx, r.repo, "http://"+r.addr+"/hooks/gitea", "b6-secret", "push")).To(Succeed())
}

func (r *latencyRun) writeSecrets() {
	r.secretFile, r.tokenFile = filepath.Join(r.dir, "webhook-secret"), filepath.Join(r.dir, "token")
	r.g.Expect(os.WriteFile(r.secretFile, []byte("b6-secret\n"), 0o600)).To(Succeed())
	r.g.Expect(os.WriteFile(r.tokenFile, []byte(r.gitea.Token+"\n"), 0o600)).To(Succeed())
}

func (r *latencyRun) gitURL() string { return r.gitea.URL + "/" + r.repo.String() + ".git" }

// push commits files on main and pushes them over HTTP; it returns the SHA.
func (r *latencyRun) push(files map[string]string) string {
	r.t.Helper()
	wt, err := r.clone.Worktree()
	r.g.Expect(err).NotTo(HaveOccurred())
	for name, content := range files {
		r.g.Expect(r.fs.MkdirAll(filepath.Dir(name), 0o755)).To(Succeed())
		f, err := r.fs.Create(name)
		r.g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Write([]byte(content))
		r.g.Expect(err).NotTo(HaveOccurred())
		r.g.Expect(f.Close()).To(Succeed())
		_, err = wt.Add(name)
		r.g.Expect(err).NotTo(HaveOccurred())
	}
	h, err := wt.Commit(fmt.Sprintf("push %d", r.pushes), &git.CommitOptions{
		Author: &object.Signature{Name: "bench", Email: "bench@example.com", When: time.Now()}})
	r.g.Expect(err).NotTo(HaveOccurred())
	r.g.Expect(r.clone.PushContext(r.ctx, &git.PushOptions{Auth: r.auth})).To(Succeed())
	r.pushes++
	return h.String()
}

// syncArgs are the flags every mode shares: the same repository, cluster, forge
// (commit statuses are posted in every mode) and a cache directory per mode.
func (r *latencyRun) syncArgs(mode string, controller bool) []string {
	command := []string{"sync", "-q"}
	if controller {
		command = []string{"controller"}
	}
	return append(command, "--repo", r.gitURL(), "--drift-interval", "0",
		"--forge", "gitea", "--forge-url", r.gitea.URL, "--forge-token-file", r.tokenFile,
		"--kubeconfig", r.c.Kubeconfig, "--cache-dir", filepath.Join(r.dir, "cache-"+strings.ReplaceAll(mode, " ", "-")))
}

// measure warms the mode up with one push (not counted), then times n pushes.
func (r *latencyRun) measure(m latencyMode, n int) latencies {
	r.t.Helper()
	var loop *exec.Cmd
	if m.args != nil {
		loop = r.startLoop(m)
		defer r.stopLoop(loop)
	}
	once := func() {
		if m.args == nil {
			r.runOnce(m.name)
		}
	}
	r.change(m.name, "warm-up", once)
	var l latencies
	for i := range n {
		total, afterPush := r.change(m.name, fmt.Sprint(i), once)
		l.total, l.afterPush = append(l.total, total), append(l.afterPush, afterPush)
	}
	return l
}

// change pushes a new value and returns the time from the start of the push, and
// from its return, until the instance is applied at the pushed SHA and Ready. after
// runs once the push returned (the --once mode starts cairn there).
func (r *latencyRun) change(mode, label string, after func()) (time.Duration, time.Duration) {
	r.t.Helper()
	w := r.watchInstance()
	defer func() { w.Stop() }()
	begin := time.Now()
	sha := r.push(map[string]string{latencyFile: latencyInstanceYAML(mode + " " + label)})
	pushed := time.Now()
	r.pushTimes = append(r.pushTimes, pushed.Sub(begin))
	after()
	deadline := time.After(2 * time.Minute)
	for !r.applied(w, sha, deadline) {
		w = r.watchInstance() // the API server ended the watch: a new one starts with the current state
	}
	return time.Since(begin), time.Since(pushed)
}

// watchInstance watches the ModuleInstance from resource version "0": the API
// server's watch cache starts with an ADDED event of the state it holds, without
// waiting to be consistent with etcd (a watch without a resource version waits for
// that and, on this cluster, often fails with "Too large resource version").
func (r *latencyRun) watchInstance() watch.Interface {
	r.t.Helper()
	w, err := r.watch.Watch(r.ctx, &cairnv1.ModuleInstanceList{}, client.InNamespace(latencyNamespace),
		client.MatchingFields{"metadata.name": latencyInstance}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	r.g.Expect(err).NotTo(HaveOccurred())
	return w
}

// applied reads watch events until the instance records sha as applied and is
// Ready (true), or the watch ends (false).
func (r *latencyRun) applied(w watch.Interface, sha string, deadline <-chan time.Time) bool {
	r.t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				time.Sleep(50 * time.Millisecond)
				return false
			}
			mi, isMI := ev.Object.(*cairnv1.ModuleInstance)
			if isMI && mi.Status.LastAppliedRevision == sha && conditions.IsTrue(mi, "Ready") {
				return true
			}
		case <-deadline:
			r.t.Fatalf("%s was not applied and Ready within 2 minutes", sha)
		}
	}
}

// measureDelivery times Gitea's webhook delivery alone: a second webhook points at
// a handler of the test that notes when each push delivery arrives.
func (r *latencyRun) measureDelivery(n int) latencies {
	r.t.Helper()
	arrived := make(chan time.Time, 64)
	addr := freeAddr(r.t)
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-Gitea-Event") == "push" {
			arrived <- time.Now()
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()
	r.g.Expect(r.gitea.AddWebhook(r.ctx, r.repo, "http://"+addr+"/", "probe-secret", "push")).To(Succeed())
	var l latencies
	for i := range n {
		for len(arrived) > 0 {
			<-arrived
		}
		begin := time.Now()
		r.push(map[string]string{latencyFile: latencyInstanceYAML(fmt.Sprintf("delivery probe %d", i))})
		pushed := time.Now()
		select {
		case at := <-arrived:
			l.total, l.afterPush = append(l.total, at.Sub(begin)), append(l.afterPush, at.Sub(pushed))
		case <-time.After(30 * time.Second):
			r.t.Fatal("gitea did not deliver the push webhook within 30 s")
		}
	}
	return l
}

// startLoop starts a long-running `cairn sync` and waits for its first sync (of
// the branch head, not timed).
func (r *latencyRun) startLoop(m latencyMode) *exec.Cmd {
	r.t.Helper()
	args := append(r.syncArgs(m.name, m.controller), m.args(r)...)
	cmd := exec.Command(r.bin, args...)
	out := &lockedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	r.g.Expect(cmd.Start()).To(Succeed())
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if r.t.Failed() {
			r.t.Logf("cairn sync (%s) output:\n%s", m.name, out)
		}
	})
	if slices.Contains(args, "--listen") || slices.Contains(args, "--webhook-bind-address") {
		r.waitListening(cmd, out)
	}
	return cmd
}

// waitListening waits until the webhook server answers.
func (r *latencyRun) waitListening(cmd *exec.Cmd, out *lockedOutput) {
	r.t.Helper()
	r.g.Eventually(func() error {
		resp, err := http.Post("http://"+r.addr+"/hooks/gitea", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed(), "cairn's webhook server; output:\n%s", out)
}

// stopLoop stops a loop with SIGTERM and expects a clean exit.
func (r *latencyRun) stopLoop(cmd *exec.Cmd) {
	r.t.Helper()
	r.g.Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		r.g.Expect(err).NotTo(HaveOccurred(), "cairn sync must exit cleanly on SIGTERM")
	case <-time.After(30 * time.Second):
		r.t.Fatal("cairn sync still runs 30 s after SIGTERM")
	}
}

// runOnce runs `cairn sync --once` to completion.
func (r *latencyRun) runOnce(mode string) {
	r.t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(r.ctx, r.bin, append(r.syncArgs(mode, false), "--once")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	r.g.Expect(cmd.Run()).To(Succeed(), "cairn sync --once:\n%s", out.String())
}

// notes explain the figures.
func (r *latencyRun) notes(tb *table, results map[string]latencies, delivery latencies) {
	poll := percentile(results["poll 1 s"].total, 50)
	tb.note("clock: from the start of `git push` (go-git over HTTP to Gitea %s on 127.0.0.1; the push itself took p50 %s) until a watch on ModuleInstance %s/%s sees status.lastAppliedRevision = the pushed SHA and Ready=True",
		giteaharness.Version, ms(percentile(r.pushTimes, 50)), latencyNamespace, latencyInstance)
	tb.note("each push changes the instance's values: its ConfigMap changes and the Deployment (1 replica, kept Available by kube-controller-manager and kwok) is re-checked for health; one warm-up push per mode is not counted; all modes run in turn on one cluster (Full), one repository, one instance and one cairn binary, each with its own warm --cache-dir, and all post commit statuses (--forge gitea)")
	tb.note("baselines: the poll-only loop at a 1 s interval isolates what the webhook saves over the tightest sensible poll (same warm process, same work after the trigger); `--once` started right after the push is the lower bound of any external trigger (cron, CI job) and shows the cost of a cold process (start, kubeconfig, discovery, ls-remote, fetch, render) that the long-running loop avoids")
	tb.note("Gitea's own share: a second push webhook to a bare HTTP handler in the test (cairn's hook pointing at a closed port), %d more pushes: delivered p50 %s after the push began, %s after it returned (p95 %s)",
		len(delivery.total), ms(percentile(delivery.total, 50)), ms(percentile(delivery.afterPush, 50)), ms(percentile(delivery.afterPush, 95)))
	tb.note("poll-only at a typical interval I adds I/2 on average and up to I at worst to the poll 1 s figure: at 1 m that is ≈ %s p50 (derived: p50 − 0.5 s + 30 s), at 10 m ≈ %s",
		secs(poll-pollInterval/2+30*time.Second), secs(poll-pollInterval/2+5*time.Minute))
	tb.note("%s; engine: %s", machine(), engineRevision(r.t))
}

// percentile is the nearest-rank p-th percentile.
func percentile(s samples, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[max(i, 0)]
}

// freeAddr returns 127.0.0.1:PORT with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// lockedOutput collects a subprocess's output for error messages.
type lockedOutput = harness.LockedBuffer

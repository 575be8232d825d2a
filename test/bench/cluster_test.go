package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"cairn.dev/cairn/manifests"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/test/harness"
)

// Shared helpers of the cluster benchmarks (B1, B2): a local cluster per
// workload, API requests counted by the client (a RoundTripper) and by the API
// server (apiserver_request_total), and the CPU time of the control plane.

// benchCluster is a local cluster started for one workload, with an admin
// client whose requests are not counted.
type benchCluster struct {
	*harness.Cluster
	admin   client.Client
	kube    *kubernetes.Clientset
	rc      *reconciler.Cluster // the admin's, for installs
	started time.Duration
}

// startBenchCluster starts a fresh cluster in a temporary directory (full: with
// controller-manager, scheduler and kwok) with cairn's CRDs installed, and
// stops it when t ends.
func startBenchCluster(t *testing.T, full bool) *benchCluster {
	t.Helper()
	ctrllog.SetLogger(logr.Discard()) // the engine logs through its options; silence controller-runtime's warning
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc, err := harness.Start(ctx, harness.Options{Dir: t.TempDir(), Full: full, StartTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("failed to start the cluster: %v", err)
	}
	t.Cleanup(hc.Stop)
	c := &benchCluster{Cluster: hc}
	if c.kube, err = kubernetes.NewForConfig(hc.RESTConfig); err != nil {
		t.Fatal(err)
	}
	if c.rc, err = reconciler.NewCluster(hc.RESTConfig); err != nil {
		t.Fatal(err)
	}
	c.admin = c.rc.Client()
	c.install(t, "cairn's CRDs", cairnCRDs(t))
	c.started = time.Since(begin)
	return c
}

// cairnCRDs are cairn's CRDs and its namespace, as cairn install applies them
// (the sync Lease lives there).
func cairnCRDs(t testing.TB) []*unstructured.Unstructured {
	return crdsAndNamespace(t, manifests.CRDs, "crds", reconciler.DefaultNamespace)
}

// crdsAndNamespace reads the YAML files of dir in fsys, one object each, and
// adds the Namespace ns.
func crdsAndNamespace(t testing.TB, fsys fs.FS, dir, ns string) []*unstructured.Unstructured {
	t.Helper()
	entries, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("no YAML files in %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries {
		b, err := fs.ReadFile(fsys, e)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, yamlObject(t, b))
	}
	n := &unstructured.Unstructured{}
	n.SetAPIVersion("v1")
	n.SetKind("Namespace")
	n.SetName(ns)
	return append(objs, n)
}

// yamlObject decodes one YAML document.
func yamlObject(t testing.TB, b []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// install applies objs with server-side apply, CRDs and namespaces first, and
// waits for them.
func (c *benchCluster) install(t testing.TB, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := c.rc.Manager("", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ApplyAllStaged(ctx, objs, ssa.DefaultApplyOptions()); err != nil {
		t.Fatalf("failed to install %s: %v", what, err)
	}
}

// countedConfig is the admin config without client-side throttling (as the
// CLI's) whose requests are counted by rc.
func (c *benchCluster) countedConfig(rc *requestCounter) *rest.Config {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.WrapTransport = rc.wrap
	return cfg
}

// serverRequests reads apiserver_request_total from the API server, summed by
// verb. Requests that name no resource (discovery, /metrics, /healthz) are
// left out.
func (c *benchCluster) serverRequests(t testing.TB) requestCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := c.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("failed to read the API server's metrics: %v", err)
	}
	return parseRequestTotal(body)
}

var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// parseRequestTotal sums the apiserver_request_total samples of the
// Prometheus text format by verb (in the RoundTripper's names), by verb and
// resource, and, for answers other than 2xx, by verb, resource and code.
func parseRequestTotal(body []byte) requestCounts {
	out := newRequestCounts()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		out.addLatency(line)
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil || end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, m := range metricLabel.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		if labels["resource"] == "" {
			continue
		}

		verb := serverVerb(labels["verb"])
		if labels["dry_run"] != "" {
			verb = "dry-run " + verb
		}
		resource := labels["resource"]
		if labels["subresource"] != "" {
			resource += "/" + labels["subresource"]
		}
		out.add(verb, resource, int(v))
		if code := labels["code"]; code != "" && code[0] != '2' {
			out.byCode[verb+" "+resource+" "+code] += int(v)
		}
	}
	return out
}

// serverVerb maps the verb label of apiserver_request_total to the
// RoundTripper's names.
func serverVerb(v string) string {
	switch v {
	case "APPLY":
		return "PATCH-apply"
	case "PATCH":
		return "PATCH-other"
	case "WATCHLIST":
		return "WATCH"
	case "CREATE":
		return "POST"
	case "UPDATE":
		return "PUT"
	}
	return v
}

// requestCounts holds request counts by verb and by "verb resource", and for
// the API server the sums and counts of its latency histograms and the requests
// it refused, by "verb resource code" (codes other than 2xx only: the rest would
// double the map for nothing).
type requestCounts struct {
	byVerb     map[string]int
	byResource map[string]int
	byCode     map[string]int
	latency    map[string]float64 // "<what> sum" in seconds, "<what> count"
}

func newRequestCounts() requestCounts {
	return requestCounts{byVerb: map[string]int{}, byResource: map[string]int{}, byCode: map[string]int{}, latency: map[string]float64{}}
}

// latencyMetrics are the histograms whose means are reported: the API
// server's handling of server-side applies and of all non-watch requests, and
// its requests to etcd.
var latencyMetrics = []struct{ name, prefix, label string }{
	{"apply", "apiserver_request_duration_seconds", `verb="APPLY"`},
	{"request", "apiserver_request_duration_seconds", ""},
	{"etcd", "etcd_request_duration_seconds", ""},
}

// addLatency adds a _sum or _count sample of a latency histogram.
func (rc requestCounts) addLatency(line string) {
	for _, m := range latencyMetrics {
		kind := ""
		switch {
		case strings.HasPrefix(line, m.prefix+"_sum{"):
			kind = " sum"
		case strings.HasPrefix(line, m.prefix+"_count{"):
			kind = " count"
		default:
			continue
		}
		if !strings.Contains(line, m.label) || strings.Contains(line, `verb="WATCH`) || strings.Contains(line, `verb="CONNECT"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			rc.latency[m.name+kind] += v
		}
	}
}

// meanLatency is the mean of a latency histogram (see latencyMetrics).
func (rc requestCounts) meanLatency(name string) time.Duration {
	n := rc.latency[name+" count"]
	if n == 0 {
		return 0
	}
	return time.Duration(rc.latency[name+" sum"] / n * float64(time.Second))
}

// latencies summarises the API server's mean latencies.
func (rc requestCounts) latencies() string {
	return fmt.Sprintf("apply %s, all requests %s, etcd %s",
		ms(rc.meanLatency("apply")), ms(rc.meanLatency("request")), ms(rc.meanLatency("etcd")))
}

func (rc requestCounts) add(verb, resource string, n int) {
	rc.byVerb[verb] += n
	rc.byResource[verb+" "+resource] += n
}

func (rc requestCounts) clone() requestCounts {
	return requestCounts{byVerb: maps.Clone(rc.byVerb), byResource: maps.Clone(rc.byResource),
		byCode: maps.Clone(rc.byCode), latency: maps.Clone(rc.latency)}
}

// minus returns rc - before.
func (rc requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{byVerb: countsMinus(rc.byVerb, before.byVerb), byResource: countsMinus(rc.byResource, before.byResource),
		byCode: countsMinus(rc.byCode, before.byCode), latency: map[string]float64{}}
	for k, v := range rc.latency {
		out.latency[k] = v - before.latency[k]
	}
	return out
}

// countsMinus is after - before, key by key, without the keys that did not change.
func countsMinus(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// total counts the requests, discovery excluded.
func (rc requestCounts) total() int {
	n := 0
	for k, v := range rc.byVerb {
		if k != "discovery" {
			n += v
		}
	}
	return n
}

// verb returns the requests of a verb to the given resources (all when none).
func (rc requestCounts) verb(verb string, resources ...string) int {
	if len(resources) == 0 {
		return rc.byVerb[verb]
	}
	n := 0
	for _, r := range resources {
		n += rc.byResource[verb+" "+r]
	}
	return n
}

// on counts the requests to the given resources, whatever their verb.
func (rc requestCounts) on(resources ...string) int {
	n := 0
	for k, v := range rc.byResource {
		if slices.Contains(resources, k[strings.LastIndexByte(k, ' ')+1:]) {
			n += v
		}
	}
	return n
}

// answered counts the requests to the given resources (all when none) that the
// API server answered with code (not 2xx), whatever their verb.
func (rc requestCounts) answered(code string, resources ...string) int {
	n := 0
	for k, v := range rc.byCode {
		fields := strings.Fields(k) // verb (one word, or "dry-run" and one), resource, code
		resource, c := fields[len(fields)-2], fields[len(fields)-1]
		if c == code && (len(resources) == 0 || slices.Contains(resources, resource)) {
			n += v
		}
	}
	return n
}

// answers lists the requests answered with code as "verb resource n", the most
// first ("none" without any).
func (rc requestCounts) answers(code string) string {
	counts := map[string]int{}
	for k, v := range rc.byCode {
		if i := strings.LastIndexByte(k, ' '); k[i+1:] == code && v != 0 {
			counts[k[:i]] = v
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	return strings.Join(mostFirst(counts), ", ")
}

var verbOrder = []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH-apply", "PATCH-other", "DELETE", "DELETECOLLECTION"}

// String lists the non-zero verbs in a fixed order, then the others sorted:
// "GET 2, PATCH-apply 100".
func (rc requestCounts) String() string {
	keys := make([]string, 0, len(rc.byVerb))
	for k := range rc.byVerb {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i := slices.Index(verbOrder, k); i >= 0 {
			return i
		}
		return len(verbOrder)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		if rc.byVerb[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, rc.byVerb[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// resources lists "verb resource: n" sorted by count, largest first.
func (rc requestCounts) resources() string {
	counts := map[string]int{}
	for k, v := range rc.byResource {
		if v != 0 && !strings.HasPrefix(k, "discovery") {
			counts[k] = v
		}
	}
	return strings.Join(mostFirst(counts), ", ")
}

// mostFirst lists "key n" for each of counts, the largest n first, ties by key.
func mostFirst(counts map[string]int) []string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if d := counts[b] - counts[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return parts
}

// requestCounter counts the requests of the clients whose transport it wraps
// and, when tracing, records each one (see trace).
type requestCounter struct {
	mu      sync.Mutex
	counts  requestCounts
	tracing bool
	traced  []tracedRequest
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: newRequestCounts()} }

// wrap is a rest.Config WrapTransport.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{next: rt, c: c}
}

// snapshot returns the counts so far.
func (c *requestCounter) snapshot() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts.clone()
}

// trace returns the requests recorded since the last call, in order.
func (c *requestCounter) trace() []tracedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.traced
	c.traced = nil
	return out
}

type countingTransport struct {
	next http.RoundTripper
	c    *requestCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := classifyRequest(req)
	t.c.mu.Lock()
	t.c.counts.add(verb, resource, 1)
	if t.c.tracing {
		t.c.traced = append(t.c.traced, newTracedRequest(req, verb, resource))
	}
	t.c.mu.Unlock()
	return t.next.RoundTrip(req)
}

// tracedRequest is one request of a trace: its verb and resource as counted,
// its path without the /api/v1 or /apis/<group>/<version> prefix, and the
// user it impersonates ("" for cairn itself).
type tracedRequest struct {
	verb, resource, path, user string
}

func newTracedRequest(req *http.Request, verb, resource string) tracedRequest {
	p := strings.Trim(req.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case verb == "discovery":
	case parts[0] == "api" && len(parts) > 2:
		p = strings.Join(parts[2:], "/")
	case parts[0] == "apis" && len(parts) > 3:
		p = strings.Join(parts[3:], "/")
	}
	return tracedRequest{verb: verb, resource: resource, path: p, user: req.Header.Get("Impersonate-User")}
}

func (r tracedRequest) String() string {
	s := r.verb + " " + r.path
	if r.user != "" {
		s += " as " + r.user
	}
	return s
}

// classifyRequest names a request's verb as the API server counts it (GET of
// one object, LIST, WATCH, POST, PUT, PATCH-apply for a server-side apply,
// PATCH-other, DELETE; "dry-run <verb>" with dryRun=All; "discovery" for
// requests that name no resource) and its resource[/subresource].
func classifyRequest(req *http.Request) (verb, resource string) {
	resource, named, ok := parseResourcePath(req.URL.Path)
	if !ok {
		return "discovery", ""
	}
	q := req.URL.Query()
	switch req.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			verb = "WATCH"
		case named:
			verb = "GET"
		default:
			verb = "LIST"
		}
	case http.MethodPatch:
		verb = "PATCH-other"
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "PATCH-apply"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if !named {
			verb = "DELETECOLLECTION"
		}
	default:
		verb = req.Method
	}
	if q.Get("dryRun") != "" {
		verb = "dry-run " + verb
	}
	return verb, resource
}

// parseResourcePath splits /api/v1/[namespaces/NS/]RES[/NAME[/SUB]] and
// /apis/G/V/...; named says a single object is addressed.
func parseResourcePath(p string) (resource string, named, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "", false, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	return resource, len(parts) >= 2, true
}

// measurement is one timed step with the requests it caused.
type measurement struct {
	wall   time.Duration
	client requestCounts // by the RoundTripper; empty for other processes
	server requestCounts // apiserver_request_total delta
	cpu    cpuTimes      // CPU time of the control plane's processes
}

// measure runs fn and records its wall time, the requests counted by rc (nil:
// none) and by the API server, and the control plane's CPU time.
func (c *benchCluster) measure(t testing.TB, rc *requestCounter, fn func() error) measurement {
	t.Helper()
	var m measurement
	clientBefore := newRequestCounts()
	if rc != nil {
		clientBefore = rc.snapshot()
	}
	serverBefore, cpuBefore := c.serverRequests(t), c.cpuTimes()
	start := time.Now()
	err := fn()
	m.wall = time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	m.server, m.cpu = c.serverRequests(t).minus(serverBefore), c.cpuTimes().minus(cpuBefore)
	m.client = newRequestCounts()
	if rc != nil {
		m.client = rc.snapshot().minus(clientBefore)
	}
	return m
}

// cpuTimes is the user+system CPU time of each control-plane process.
type cpuTimes map[string]time.Duration

// cpuTimes reads /proc/<pid>/stat of the processes recorded in Dir/pids.
func (c *benchCluster) cpuTimes() cpuTimes {
	out := cpuTimes{}
	files, _ := filepath.Glob(filepath.Join(c.Dir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			continue
		}
		if d, ok := procCPU(fields[0]); ok {
			out[strings.TrimSuffix(filepath.Base(f), ".pid")] = d
		}
	}
	return out
}

// procCPU is utime+stime of a process (clock ticks of 10 ms).
func procCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

func (c cpuTimes) minus(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v - before[k]
	}
	return out
}

// String lists the processes' CPU seconds, largest first.
func (c cpuTimes) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(c[b] - c[a]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.1f s", k, c[k].Seconds())
	}
	return strings.Join(parts, ", ")
}

// writeFiles writes files (path relative to dir: content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// platformYAML is a Platform with no prune limits that allows every namespace
// but kube-*.
const platformYAML = `apiVersion: cairn.dev/v1alpha1
kind: Platform
metadata:
  name: cluster
spec:
  namespaces:
    deny: ["kube-*"]
`

// secs formats a duration in seconds.
func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

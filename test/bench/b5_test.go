package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v3/pkg/chart"

	"cairn.dev/cairn/sign"
	"cairn.dev/cairn/test/harness"
)

// B5: resolve a chart's tag, verify its cosign signature by digest and pull it
// by that digest, for N = 100 signed Helm charts in Debian's docker-registry
// (plain HTTP on loopback), with cairn's sign package in-process:
//   - cold: a fresh sign.Client and a fresh sign.Verifier (nothing cached);
//   - warm: the same Client and Verifier again, the verification cached by digest;
//   - no verify cache: a fresh Client and Verifier for every chart, what a tool
//     without a verification cache does, in-process;
//
// against the CLIs a CI loop would run, one process each per chart: `cosign
// verify --key` of the tag (which resolves it and prints the verified digest),
// then `helm pull` of that digest. Each runs one after the other and 8 at a
// time. Registry requests are counted from the registry's own access log.

const (
	b5Version     = "1.0.0"
	b5KeyPassword = "b5-key-password"
	b5Workers     = 8
)

func TestB5PullVerify(t *testing.T) {
	n, nCLI, reps := pick(100, 6), pick(100, 3), pick(5, 1)
	b := newB5Bench(t, n)

	// Untimed: one uncached pass, so that every phase below finds the
	// registry's files in the page cache.
	b.timeUncached(1)
	b.requests()

	type row struct {
		phase   string
		workers int
		wall    time.Duration
		reqs    reqCount
	}
	var rows []row
	add := func(phase string, workers int, walls []time.Duration, reqs reqCount) {
		rows = append(rows, row{phase, workers, samples(walls).median(), reqs})
	}
	for _, w := range []int{1, b5Workers} {
		var cold, warm, uncached []time.Duration
		var coldReqs, warmReqs, uncachedReqs reqCount
		for range reps {
			c, v := b.client(), &sign.Verifier{}
			cold = append(cold, b.timePulls(w, c, v, false))
			coldReqs = b.requests()
			warm = append(warm, b.timePulls(w, c, v, true))
			warmReqs = b.requests()
			uncached = append(uncached, b.timeUncached(w))
			uncachedReqs = b.requests()
		}
		// A cached verification makes no request: the cache saves exactly
		// the signature tag's HEAD, its manifest and its payload per chart.
		if got, want := warmReqs.total(), coldReqs.total()-3*n; got != want {
			t.Errorf("concurrency %d: warm pass made %d registry requests, want %d (cold %d minus 3 per chart): %v", w, got, want, coldReqs.total(), warmReqs)
		}
		add("cairn cold: fresh Client + Verifier", w, cold, coldReqs)
		add("cairn warm: same Client + Verifier (verification cached)", w, warm, warmReqs)
		add("cairn, no verify cache: fresh Client + Verifier per chart", w, uncached, uncachedReqs)
	}

	cosign, helm := tool(t, "cosign"), tool(t, "helm")
	var cli map[int]time.Duration // by workers: wall time of all N charts
	var cliSplit map[int][2]time.Duration
	var cliAgents agentCount
	if cosign != "" && helm != "" {
		c := newB5CLI(t, b, cosign, helm)
		if _, _, err := c.run(0); err != nil { // warm-up, untimed
			t.Fatal(err)
		}
		b.requests()
		cli, cliSplit = map[int]time.Duration{}, map[int][2]time.Duration{}
		for _, w := range []int{1, b5Workers} {
			var verifyTime, pullTime atomic.Int64
			wall := parallel(t, nCLI, w, func(_, i int) error {
				v, p, err := c.run(i)
				verifyTime.Add(int64(v))
				pullTime.Add(int64(p))
				return err
			})
			// Per chart, scaled to N so that it compares with cairn's rows.
			cli[w] = wall * time.Duration(n) / time.Duration(nCLI)
			cliSplit[w] = [2]time.Duration{time.Duration(verifyTime.Load()) / time.Duration(nCLI), time.Duration(pullTime.Load()) / time.Duration(nCLI)}
			reqs, agents := b.requestsByAgent()
			cliAgents = agents
			add("`cosign verify --key` + `helm pull` by digest (CLI per chart)", w, []time.Duration{cli[w]}, reqs.scale(n, nCLI))
		}
	} else {
		t.Log("cosign or helm not built (hack/bench-tools.sh): the CLI baseline is skipped, the uncached path is the baseline")
	}

	uncachedWall := map[int]time.Duration{}
	for _, r := range rows {
		if strings.HasPrefix(r.phase, "cairn, no verify cache") {
			uncachedWall[r.workers] = r.wall
		}
	}
	tb := newTable(fmt.Sprintf("B5 pull + verify: %d signed Helm charts from docker-registry, cairn sign vs cosign + helm CLIs", n),
		"phase", "charts", "concurrency", "wall time", "per chart", "registry requests (access log)", "requests per chart",
		"speed-up vs CLIs (same concurrency)", "speed-up vs no verify cache (same concurrency)")
	for _, r := range rows {
		vsCLI := "n/a"
		if base, ok := cli[r.workers]; ok {
			vsCLI = ratio(float64(base), float64(r.wall))
		}
		tb.add(r.phase, n, r.workers, ms(r.wall), ms(r.wall/time.Duration(n)), r.reqs, fmt.Sprintf("%.1f", float64(r.reqs.total())/float64(n)),
			vsCLI, ratio(float64(uncachedWall[r.workers]), float64(r.wall)))
	}
	tb.note("each chart: resolve tag %s → verify the cosign signature of that digest (key-based, no transparency log) → pull the chart by digest; every pulled archive is checked byte-equal to the pushed one, every verification to have used the key (and, warm, to have come from the cache)", b5Version)
	tb.note("charts: %d distinct charts (one ConfigMap template, %s each), each in its own repository, pushed and signed by cairn's sign package before the timing; one untimed uncached pass first, so the registry serves every phase from the page cache", n, byteSize(int64(b.avgSize)))
	tb.note("cairn times are medians of %d runs; cold and warm share a Client (connections, auth cache) and a Verifier; no verify cache = a new Client and Verifier per chart, as a tool without that cache would do", reps)
	if cli != nil {
		scaled := ""
		if nCLI != n {
			scaled = fmt.Sprintf(" (the first %d charts, wall time and requests scaled to %d)", nCLI, n)
		}
		tb.note("CLIs, one process each per chart, as a CI loop runs them: `cosign verify --key k.pub --insecure-ignore-tlog=true --allow-http-registry HOST/REPO:%s` (resolves the tag, verifies, prints the digest), then `helm pull oci://HOST/REPO@DIGEST --plain-http`; timed once per concurrency%s, after one untimed run", b5Version, scaled)
		tb.note("CLI time per chart, sequential: cosign verify %s + helm pull %s; 8 at a time (each process's own time): %s + %s",
			ms(cliSplit[1][0]), ms(cliSplit[1][1]), ms(cliSplit[b5Workers][0]), ms(cliSplit[b5Workers][1]))
		tb.note("CLI requests per chart: cosign %.1f (among them a 404 each from the OCI 1.1 referrers API and its fallback tag, where cosign 2.6 looks for new-style bundles first), helm %.1f (manifest, config and chart blobs)",
			float64(cliAgents["cosign"])/float64(nCLI), float64(cliAgents["helm"])/float64(nCLI))
		tb.note("cosign %s, helm %s, built by hack/bench-tools.sh", toolVersion(t, cosign), toolVersion(t, helm))
	} else {
		tb.note("the cosign and helm CLIs were not built (hack/bench-tools.sh): no CLI baseline in this run")
	}
	tb.note("docker-registry %s (Debian), plain HTTP on 127.0.0.1; requests counted from its access log (HEAD = tag or signature tag resolved; GET /v2/ = a client's API version check); GOMAXPROCS %d", registryVersion(t), runtime.GOMAXPROCS(0))
	tb.report(t, "B5")
}

// b5Bench is a registry holding n signed charts, and the key that verifies them.
type b5Bench struct {
	t       *testing.T
	reg     *harness.Registry
	logPath string
	logOff  int64
	marks   int
	dir     string
	pubPath string
	keys    []*sign.PublicKey
	charts  []b5Chart
	avgSize int
}

type b5Chart struct {
	repo   string
	digest digest.Digest
	tgz    []byte
}

func newB5Bench(t *testing.T, n int) *b5Bench {
	t.Helper()
	dir := t.TempDir()
	reg, err := harness.StartRegistry(context.Background(), harness.RegistryOptions{Dir: filepath.Join(dir, "registry")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	b := &b5Bench{t: t, reg: reg, dir: dir, logPath: filepath.Join(dir, "registry", "logs", "registry.log")}

	privPEM, pubPEM, err := sign.GenerateKeyPair([]byte(b5KeyPassword))
	if err != nil {
		t.Fatal(err)
	}
	key, err := sign.LoadPrivateKey(privPEM, []byte(b5KeyPassword))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	b.keys = []*sign.PublicKey{pub}
	b.pubPath = filepath.Join(dir, "k.pub")
	if err := os.WriteFile(b.pubPath, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	c := b.client()
	total := 0
	for i := range n {
		tgz := b5ChartArchive(t, i)
		repo := "charts/" + b5ChartName(i)
		desc, tag, err := c.PushChart(ctx, repo, tgz)
		if err != nil {
			t.Fatal(err)
		}
		if tag != b5Version {
			t.Fatalf("chart %d pushed with tag %q, want %q", i, tag, b5Version)
		}
		if err := c.Sign(ctx, repo, desc.Digest, key); err != nil {
			t.Fatal(err)
		}
		b.charts = append(b.charts, b5Chart{repo: repo, digest: desc.Digest, tgz: tgz})
		total += len(tgz)
	}
	b.avgSize = total / n
	return b
}

func b5ChartName(i int) string { return fmt.Sprintf("b5-chart-%03d", i) }

// b5ChartArchive packages chart i: its own name, values and one ConfigMap.
func b5ChartArchive(t *testing.T, i int) []byte {
	t.Helper()
	ch := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion:  chart.APIVersionV2,
			Name:        b5ChartName(i),
			Version:     b5Version,
			Description: fmt.Sprintf("B5 benchmark chart %d", i),
			Type:        "application",
		},
		Values: map[string]any{"index": i, "greeting": fmt.Sprintf("hello from chart %d", i)},
		Templates: []*chart.File{{
			Name: "templates/configmap.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + b5ChartName(i) +
				"\ndata:\n  index: {{ .Values.index | quote }}\n  greeting: {{ .Values.greeting | quote }}\n"),
		}},
	}
	return packageChart(t, ch)
}

func (b *b5Bench) client() *sign.Client {
	c, err := sign.NewClient(sign.Endpoint{Host: b.reg.Host, PlainHTTP: true})
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// pullVerified resolves chart i's tag, verifies the digest through v and
// pulls the chart by that digest, checking each step's outcome.
func (b *b5Bench) pullVerified(c *sign.Client, v *sign.Verifier, i int, wantCached bool) error {
	ctx := context.Background()
	ch := b.charts[i]
	desc, err := c.Resolve(ctx, ch.repo, b5Version)
	if err != nil {
		return err
	}
	if desc.Digest != ch.digest {
		return fmt.Errorf("%s:%s resolved to %s, pushed as %s", ch.repo, b5Version, desc.Digest, ch.digest)
	}
	res, cached, err := v.VerifyCached(ctx, c, ch.repo, desc.Digest, b.keys)
	if err != nil {
		return err
	}
	if !res.Verified || res.KeyID != b.keys[0].ID() || cached != wantCached {
		return fmt.Errorf("%s@%s: verified %t by %q, cached %t; want verified by %q, cached %t",
			ch.repo, desc.Digest, res.Verified, res.KeyID, cached, b.keys[0].ID(), wantCached)
	}
	tgz, err := c.PullChart(ctx, ch.repo, desc.Digest)
	if err != nil {
		return err
	}
	if !bytes.Equal(tgz, ch.tgz) {
		return fmt.Errorf("%s@%s: pulled %d bytes that differ from the %d pushed", ch.repo, desc.Digest, len(tgz), len(ch.tgz))
	}
	return nil
}

// timePulls pulls and verifies every chart through c and v from workers
// goroutines and returns the wall time.
func (b *b5Bench) timePulls(workers int, c *sign.Client, v *sign.Verifier, wantCached bool) time.Duration {
	return parallel(b.t, len(b.charts), workers, func(_, i int) error {
		return b.pullVerified(c, v, i, wantCached)
	})
}

// timeUncached is timePulls with a new Client and Verifier for every chart.
func (b *b5Bench) timeUncached(workers int) time.Duration {
	return parallel(b.t, len(b.charts), workers, func(_, i int) error {
		return b.pullVerified(b.client(), &sign.Verifier{}, i, false)
	})
}

// reqCount is the number of registry requests by kind.
type reqCount map[string]int

// agentCount is the number of registry requests by client (the product of
// the User-Agent: cairn, cosign, Helm).
type agentCount map[string]int

// reqKinds orders the kinds in reports.
var reqKinds = []string{"GET /v2/", "HEAD", "GET manifest", "GET blob"}

func (r reqCount) total() int {
	n := 0
	for _, v := range r {
		n += v
	}
	return n
}

// scale returns r × n ÷ of, rounded.
func (r reqCount) scale(n, of int) reqCount {
	s := reqCount{}
	for k, v := range r {
		s[k] = (v*n + of/2) / of
	}
	return s
}

func (r reqCount) String() string {
	var parts []string
	kinds := slices.Clone(reqKinds)
	for k := range r {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds[len(reqKinds):])
	for _, k := range kinds {
		if r[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, r[k]))
		}
	}
	return fmt.Sprintf("%d (%s)", r.total(), strings.Join(parts, ", "))
}

// accessLine matches a request of the registry's access log (combined format):
// `127.0.0.1 - - [date] "GET /v2/... HTTP/1.1" 200 ...`.
var accessLine = regexp.MustCompile(`"([A-Z]+) (/v2/\S*) HTTP/[0-9.]+" ([0-9]{3}) .*"([^"]*)"\s*$`)

// requests returns the requests the registry logged since the last call. It
// sends a marker request and waits for it in the log, so that every request of
// the phase just finished is there.
func (b *b5Bench) requests() reqCount {
	r, _ := b.requestsByAgent()
	return r
}

// requestsByAgent is requests, also counted by client.
func (b *b5Bench) requestsByAgent() (reqCount, agentCount) {
	b.t.Helper()
	b.marks++
	marker := fmt.Sprintf("b5mark=%d", b.marks)
	resp, err := http.Get(b.reg.URL() + "/v2/?" + marker)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	var data []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		data = b.readLog()
		if bytes.Contains(data, []byte(marker+" ")) {
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("request %s not in the registry's access log %s after 10 s", marker, b.logPath)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A request's log line is written as its handler returns, which can be
	// a moment after the client has read the response: let stragglers land.
	time.Sleep(50 * time.Millisecond)
	data = b.readLog()
	b.logOff += int64(len(data))
	count, agents := reqCount{}, agentCount{}
	for line := range strings.Lines(string(data)) {
		m := accessLine.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[2], "b5mark=") {
			continue
		}
		kind := requestKind(m[1], m[2])
		if m[3][0] != '2' && m[3][0] != '3' && m[2] != "/v2/" {
			kind += " " + m[3] // a miss: counted apart, by status
		}
		count[kind]++
		agent, _, _ := strings.Cut(m[4], "/")
		agents[strings.ToLower(agent)]++
	}
	return count, agents
}

func requestKind(method, path string) string {
	switch {
	case path == "/v2/":
		return method + " /v2/"
	case method == "HEAD":
		return "HEAD"
	case strings.Contains(path, "/manifests/"):
		return method + " manifest"
	case strings.Contains(path, "/blobs/"):
		return method + " blob"
	case strings.Contains(path, "/referrers/"):
		return method + " referrers"
	}
	return method + " other"
}

// readLog returns the registry log from the last offset to its end, up to
// the last complete line.
func (b *b5Bench) readLog() []byte {
	f, err := os.Open(b.logPath)
	if err != nil {
		b.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(b.logOff, 0); err != nil {
		b.t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		b.t.Fatal(err)
	}
	data := buf.Bytes()
	return data[:bytes.LastIndexByte(data, '\n')+1]
}

// b5CLI runs `cosign verify` and `helm pull` for one chart, in a home of
// their own (no user configuration or cache read or written).
type b5CLI struct {
	t            *testing.T
	b            *b5Bench
	cosign, helm string
	env          []string
	out          string
}

func newB5CLI(t *testing.T, b *b5Bench, cosign, helm string) *b5CLI {
	home := filepath.Join(b.dir, "home")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home+"/.config", "XDG_CACHE_HOME="+home+"/.cache",
		"XDG_DATA_HOME="+home+"/.local/share", "HELM_CONFIG_HOME="+home+"/helm/config", "HELM_CACHE_HOME="+home+"/helm/cache",
		"HELM_DATA_HOME="+home+"/helm/data", "DOCKER_CONFIG="+home+"/.docker", "TUF_ROOT="+home+"/.sigstore")
	return &b5CLI{t: t, b: b, cosign: cosign, helm: helm, env: env, out: filepath.Join(b.dir, "pulled")}
}

// run verifies chart i with cosign (by tag, reading the verified digest from
// its output) and pulls that digest with helm, checking the archive; it
// returns the time of each.
func (c *b5CLI) run(i int) (verify, pull time.Duration, err error) {
	ch := c.b.charts[i]
	ref := c.b.reg.Host + "/" + ch.repo
	start := time.Now()
	out, err := c.cmd(c.cosign, "verify", "--key", c.b.pubPath, "--insecure-ignore-tlog=true", "--allow-http-registry", "--output=json", ref+":"+b5Version)
	verify = time.Since(start)
	if err != nil {
		return verify, 0, err
	}
	var sigs []struct {
		Critical struct {
			Image struct {
				Digest string `json:"docker-manifest-digest"`
			} `json:"image"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(lastLine(out), &sigs); err != nil || len(sigs) == 0 {
		return verify, 0, fmt.Errorf("cosign verify %s: unexpected output %q (%v)", ref, out, err)
	}
	dgst := sigs[0].Critical.Image.Digest
	if dgst != ch.digest.String() {
		return verify, 0, fmt.Errorf("cosign verified %s@%s, pushed as %s", ref, dgst, ch.digest)
	}
	dir := filepath.Join(c.out, fmt.Sprint(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return verify, 0, err
	}
	start = time.Now()
	_, err = c.cmd(c.helm, "pull", "oci://"+ref+"@"+dgst, "--plain-http", "--destination", dir)
	pull = time.Since(start)
	if err != nil {
		return verify, pull, err
	}
	// Pulled by digest, helm names the file after the reference.
	files, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(files) != 1 {
		return verify, pull, fmt.Errorf("helm pull %s@%s: want one archive in %s, found %v (%v)", ref, dgst, dir, files, err)
	}
	tgz, err := os.ReadFile(files[0])
	if err != nil {
		return verify, pull, err
	}
	if !bytes.Equal(tgz, ch.tgz) {
		return verify, pull, fmt.Errorf("helm pull %s@%s: %d bytes that differ from the %d pushed", ref, dgst, len(tgz), len(ch.tgz))
	}
	return verify, pull, os.RemoveAll(dir)
}

func (c *b5CLI) cmd(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return lines[len(lines)-1]
}

// toolVersion is the version of a tool built by hack/bench-tools.sh, from
// the directory it is cached in (<tool>-<version>/<tool>).
func toolVersion(t *testing.T, tool string) string {
	path, err := filepath.EvalSymlinks(tool)
	if err != nil {
		t.Fatal(err)
	}
	_, v, _ := strings.Cut(filepath.Base(filepath.Dir(path)), "-")
	return v
}

// registryVersion is the version of Debian's docker-registry.
func registryVersion(t *testing.T) string {
	out, err := exec.Command("docker-registry", "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "(version unknown)"
	}
	return f[len(f)-1]
}

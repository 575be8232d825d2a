package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// rawChart is a chart archive built entry by entry, so that it can be hostile.
type tarEntry struct {
	name     string
	data     []byte
	typeflag byte
	linkname string
}

func rawChartArchive(t *testing.T, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: e.typeflag, Linkname: e.linkname}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pushRawChart pushes an archive in Helm's OCI layout with oras directly (cairn's own
// push refuses hostile charts), tagged tag; it returns the manifest digest.
func pushRawChart(t *testing.T, ctx context.Context, host, repo, tag, name string, tgz []byte) digest.Digest {
	t.Helper()
	r, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	config, _ := json.Marshal(map[string]string{"name": name, "version": tag, "apiVersion": "v2"})
	push := func(mediaType string, data []byte) ocispec.Descriptor {
		d := content.NewDescriptorFromBytes(mediaType, data)
		if err := r.Push(ctx, d, bytes.NewReader(data)); err != nil && !strings.Contains(err.Error(), "exists") {
			t.Fatal(err)
		}
		return d
	}
	cfg := push("application/vnd.cncf.helm.config.v1+json", config)
	layer := push("application/vnd.cncf.helm.chart.content.v1.tar+gzip", tgz)
	manifest, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{layer}})
	md := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, manifest)
	if err := r.PushReference(ctx, md, bytes.NewReader(manifest), tag); err != nil {
		t.Fatal(err)
	}
	return md.Digest
}

const hostileChartYAML = "apiVersion: v2\nname: hello\nversion: 0.1.0\n"

// TestHostileChartsAreRefused pushes signed but hostile chart archives to the real
// registry: entries escaping with ../, an absolute name, a symlink, a decompression
// bomb, and a Chart.yaml whose name escapes. Each fails its instance with a typed
// reason naming the problem; nothing of it is applied.
func TestHostileChartsAreRefused(t *testing.T) {
	e := newEnv(t)
	host := e.cluster.RegistryHost
	keys := newKeyPair(t)
	rc := registryClient(t, &testRegistry{Registry: harnessRegistry(host)}, false)
	e.putCairnSecret("pub-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": keys.public})
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: evil\ndata: {a: b}\n")
	cases := []struct {
		name, want string
		entries    []tarEntry
	}{
		{"dotdot", "..", []tarEntry{{name: "hello/Chart.yaml", data: []byte(hostileChartYAML)},
			{name: "hello/templates/../../../evil.yaml", data: cm}}},
		{"absolute", "/etc", []tarEntry{{name: "hello/Chart.yaml", data: []byte(hostileChartYAML)},
			{name: "/etc/evil.yaml", data: cm}}},
		{"symlink", "evil.yaml", []tarEntry{{name: "hello/Chart.yaml", data: []byte(hostileChartYAML)},
			{name: "hello/templates/evil.yaml", typeflag: tar.TypeSymlink, linkname: "/etc/passwd"}}},
		{"bomb", "file cap", []tarEntry{{name: "hello/Chart.yaml", data: []byte(hostileChartYAML)},
			{name: "hello/templates/zeros.yaml", data: make([]byte, 6<<20)}}},
		{"name", "../../x", []tarEntry{{name: "hello/Chart.yaml", data: []byte("apiVersion: v2\nname: ../../x\nversion: 0.1.0\n")},
			{name: "hello/templates/cm.yaml", data: cm}}},
	}
	files := map[string]string{
		"platform.yaml": platformWithVerify("Enforce", ""),
		"registries.yaml": registryYAML("local", host, true,
			"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+e.ns+"}}]\n"),
	}
	for _, c := range cases {
		tgz := rawChartArchive(t, c.entries)
		e.g.Expect(len(tgz)).To(BeNumerically("<", 1<<20), "the bomb is small when compressed")
		d := pushRawChart(t, e.ctx, host, "hostile/"+c.name, "0.1.0", "hello", tgz)
		e.g.Expect(rc.Sign(e.ctx, "hostile/"+c.name, d, keys.key)).To(Succeed())
		files["instances/"+c.name+".yaml"] = chartInstanceYAML(c.name, e.ns, "oci://"+host+"/hostile/"+c.name, "0.1.0", "")
	}
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	for _, c := range cases {
		got := result(res, e.ns, c.name)
		e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), c.name)
		e.g.Expect(got.Retry).To(Equal(outcome.Stalled), c.name)
		e.g.Expect(got.Reason).To(BeElementOf("ChartInvalid", "LimitExceeded"), "%s: %+v", c.name, got)
		e.g.Expect(got.Message).To(ContainSubstring(c.want), c.name)
		mi := e.instanceCR(e.ns, c.name)
		e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeTrue(), "signed, and still refused: %s", c.name)
	}
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "evil")).To(BeNil())
}

// faultProxy stands in front of the real registry and, when told, answers 500 or
// corrupts the manifest served for one digest.
type faultProxy struct {
	srv     *httptest.Server
	mode    atomic.Value // "", "500", "corrupt"
	corrupt atomic.Value // digest string whose manifest is corrupted
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, _ := url.Parse("http://" + target)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &faultProxy{}
	p.mode.Store("")
	p.corrupt.Store("")
	rp.ModifyResponse = func(resp *http.Response) error {
		d, _ := p.corrupt.Load().(string)
		if p.mode.Load() != "corrupt" || d == "" || resp.Request.Method != http.MethodGet ||
			!strings.HasSuffix(resp.Request.URL.Path, "/manifests/"+d) {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body.Close()
		body = bytes.Replace(body, []byte(`"schemaVersion":2`), []byte(`"schemaVersion": 2`), 1)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
		return nil
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.mode.Load() == "500" && r.URL.Path != "/v2/" {
			http.Error(w, `{"errors":[{"code":"UNKNOWN","message":"injected failure"}]}`, http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) host() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// TestRegistryFaultsKeepTheLastGoodState syncs a signed chart through a proxy to the
// real registry, then: the registry answers 500 (transient, retried), serves a
// manifest that does not match its digest (refused), has no such version (404), and
// has the tag moved to unsigned content. Each time the instance fails with a typed
// reason and the objects of the last good sync stay.
func TestRegistryFaultsKeepTheLastGoodState(t *testing.T) {
	e := newEnv(t)
	host := e.cluster.RegistryHost
	keys := newKeyPair(t)
	rc := registryClient(t, &testRegistry{Registry: harnessRegistry(host)}, false)
	repoPath := "faults/" + e.ns
	good := pushChart(t, e.ctx, rc, repoPath, chartArchive(t, "hello", "0.1.0", "good"), keys.key)
	proxy := newFaultProxy(t, host)
	e.putCairnSecret("pub-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": keys.public})
	url := "oci://" + proxy.host() + "/" + repoPath
	instance := func(version, greeting string) string {
		return chartInstanceYAML("hello", e.ns, url, version, "  values:\n    greeting: "+greeting+"\n")
	}
	repo := newGitRepo(t, map[string]string{
		"platform.yaml": platformWithVerify("Enforce", ""),
		"registries.yaml": registryYAML("proxy", proxy.host(), true,
			"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+e.ns+"}}]\n"),
		"instances/hello.yaml": instance("0.1.0", "first"),
	})
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
	lastGood := func() {
		t.Helper()
		e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting").Object["data"]).To(HaveKeyWithValue("greeting", "first"))
	}
	step := func(msg, greeting, version string, retry outcome.Kind, reason, text string) {
		t.Helper()
		repo.commit(msg, map[string]string{"instances/hello.yaml": instance(version, greeting)})
		got := result(e.sync(repo), e.ns, "hello")
		e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%s: %+v", msg, got)
		e.g.Expect(got.Retry).To(Equal(retry), "%s: %+v", msg, got)
		e.g.Expect(got.Reason).To(Equal(reason), "%s: %+v", msg, got)
		e.g.Expect(got.Message).To(ContainSubstring(text), msg)
		lastGood()
	}

	proxy.mode.Store("500")
	step("registry 500", "during-500", "0.1.0", outcome.Transient, "FetchFailed", "500")

	proxy.mode.Store("corrupt")
	proxy.corrupt.Store(good.String())
	step("digest mismatch", "during-corruption", "0.1.0", outcome.Stalled, "DigestMismatch", "DigestMismatch")

	proxy.mode.Store("")
	step("missing version", "missing", "9.9.9", outcome.Stalled, "NotFound", "9.9.9")

	// The tag moves to other, unsigned content: refused, the old digest stays applied.
	moved := pushChart(t, e.ctx, rc, repoPath, chartArchive(t, "hello", "0.1.0", "moved"), nil)
	e.g.Expect(moved).NotTo(Equal(good))
	step("tag moved", "after-move", "0.1.0", outcome.Stalled, cairnv1.ReasonSignatureMissing, moved.String())
	e.g.Expect(e.instanceCR(e.ns, "hello").Status.SourceDigest).To(Equal(good.String()))

	// A declared digest that the version no longer resolves to is refused, naming both.
	pinned := func(version, dgst, greeting string) string {
		return "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: hello\n  namespace: " + e.ns +
			"\nspec:\n  module:\n    chart:\n      url: " + url + "\n" + version + "      digest: " + dgst +
			"\n  timeout: 1m\n  values:\n    greeting: " + greeting + "\n"
	}
	repo.commit("pin both", map[string]string{"instances/hello.yaml": pinned("      version: \"0.1.0\"\n", good.String(), "pinned")})
	got := result(e.sync(repo), e.ns, "hello")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"))
	e.g.Expect(got.Message).To(And(ContainSubstring(moved.String()), ContainSubstring("not the declared digest "+good.String())))
	lastGood()
	// Pinned by digest alone, the signed chart is used whatever the tag says now.
	repo.commit("pin digest", map[string]string{"instances/hello.yaml": pinned("", good.String(), "pinned")})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting").Object["data"]).To(HaveKeyWithValue("greeting", "pinned"))
	e.g.Expect(e.instanceCR(e.ns, "hello").Status.Artifacts[0].Verification).To(Equal(cairnv1.VerificationVerified))
}

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/test/harness"
)

// applyRecorder sees every request of a client. It records the server-side apply
// requests (not their dry-runs) for ConfigMaps of one namespace and, when armed, holds every request once
// a given number of them has been sent, until released: the test stops the API server
// in between, so the fault lands at a known point of the apply.
type applyRecorder struct {
	mu        sync.Mutex
	namespace string
	names     []string // ConfigMaps applied, in the order the requests were sent
	holdAfter int      // 0: never hold
	held      int      // requests held since the limit was reached
	reached   chan struct{}
	release   chan struct{}
	released  bool
}

// wrap is a rest.Config WrapTransport.
func (a *applyRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if gate := a.observe(req); gate != nil {
			select {
			case <-gate:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// observe records req and returns the channel it must wait on, if any.
func (a *applyRecorder) observe(req *http.Request) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return nil
	}
	if a.release != nil {
		a.held++
		return a.release
	}
	if name, ok := a.configMapApply(req); ok {
		a.names = append(a.names, name)
		if a.holdAfter > 0 && len(a.names) == a.holdAfter {
			a.release = make(chan struct{})
			close(a.reached)
		}
	}
	return nil
}

func (a *applyRecorder) configMapApply(req *http.Request) (string, bool) {
	prefix := "/api/v1/namespaces/" + a.namespace + "/configmaps/"
	if req.Method != http.MethodPatch || !strings.HasPrefix(req.URL.Path, prefix) || req.URL.Query().Get("dryRun") != "" ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
		return "", false
	}
	return path.Base(req.URL.Path), true
}

// reset forgets what was recorded; with holdAfter > 0 it arms the hold and returns
// the channel closed when that many applies have been sent.
func (a *applyRecorder) reset(namespace string, holdAfter int) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.namespace, a.names, a.holdAfter, a.held, a.release, a.released = namespace, nil, holdAfter, 0, nil, false
	a.reached = make(chan struct{})
	return a.reached
}

// releaseHeld lets the held requests go (to wherever the API server now is).
func (a *applyRecorder) releaseHeld() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.release != nil && !a.released {
		close(a.release)
		a.released = true
	}
}

// applied returns the ConfigMaps applied since the last reset and the requests held.
func (a *applyRecorder) applied() (names []string, held int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.names...), a.held
}

// startOwnCluster starts a cluster of etcd and kube-apiserver for one test, so the test
// may stop its API server without disturbing the shared cluster (or a cluster given by
// $CAIRN_TEST_KUBECONFIG, which the harness cannot restart).
func startOwnCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bins, err := harness.FindBinaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	c, err := harness.Start(ctx, harness.Options{Dir: t.TempDir(), BinDir: bins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("own cluster (etcd, kube-apiserver) started in %s", time.Since(begin).Round(time.Millisecond))
	return c
}

// newEnvWithConfig is one test's env against cluster hc, with cairn's engine
// using cfg (newEnv: the shared cluster and its own config).
func newEnvWithConfig(t *testing.T, hc *harness.Cluster, cfg *rest.Config) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cluster, err := reconciler.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, g: NewWithT(t), ctx: ctx, cluster: hc, c: cluster.Client(), cache: t.TempDir(),
		ns: fmt.Sprintf("team-%x", rand.Uint32())}
	installCRDs(t, ctx, cluster)
	e.reset()
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(e.cache, "modules")
	opts.DefaultTimeout = time.Minute
	e.progress = &lockedBuffer{}
	opts.Progress = e.progress
	e.engine = reconciler.New(cluster, render.NewRenderer(), opts)
	return e
}

// bulkModule renders a ServiceAccount and values.count ConfigMaps <name>-<i>.
const bulkModule = `package bulk

import "list"

instance: {name: string, namespace: string}
values: count: int & >=0 & <=5000
objects: {
	serviceAccount: {apiVersion: "v1", kind: "ServiceAccount", metadata: name: instance.name}
	for i in list.Range(0, values.count, 1) {
		"cm-\(i)": {
			apiVersion: "v1"
			kind:       "ConfigMap"
			metadata: name: "\(instance.name)-\(i)"
			data: value: "value-\(i)"
		}
	}
}
`

func bulkInstanceYAML(name, ns string, count int) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/bulk\n  timeout: 1m\n  values:\n    count: %d\n", name, ns, count)
}

// inventoryEntries reads the recorded inventory of an instance, inline or spilled into
// its Secret in cairn's namespace.
func (e *env) inventoryEntries(ns, name string) []cairnv1.InventoryEntry {
	e.t.Helper()
	mi := e.instance(ns, name)
	e.g.Expect(mi).NotTo(BeNil(), "ModuleInstance %s/%s", ns, name)
	inv := mi.Status.Inventory
	if inv == nil {
		return nil
	}
	if inv.SecretRef == nil {
		return inv.Entries
	}
	var s corev1.Secret
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: inv.SecretRef.Name}, &s)).
		To(Succeed(), "large inventories live in cairn's namespace")
	zr, err := gzip.NewReader(bytes.NewReader(s.Data["inventory.json.gz"]))
	e.g.Expect(err).NotTo(HaveOccurred())
	var entries []cairnv1.InventoryEntry
	e.g.Expect(json.NewDecoder(zr).Decode(&entries)).To(Succeed())
	e.g.Expect(entries).To(HaveLen(int(inv.Count)), "inventory count of %s/%s", ns, name)
	return entries
}

// configMapUIDs returns the UID of every ConfigMap in ns, by name, except the CA bundle
// kube-controller-manager puts in every namespace.
func (e *env) configMapUIDs(ns string) map[string]string {
	e.t.Helper()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	e.g.Expect(e.c.List(e.ctx, list, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil && m.Name != "kube-root-ca.crt" {
			out[m.Name] = string(m.UID)
		}
	}
	return out
}

// countConfigMaps counts the live ConfigMaps in ns whose name starts with prefix.
func countConfigMaps(ctx context.Context, c client.Client, ns, prefix string) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, m := range list.Items {
		if strings.HasPrefix(m.Name, prefix) && m.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// createConfigMap creates a ConfigMap that no instance declares.
func (e *env) createConfigMap(ns, name string, labels map[string]string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Data: map[string]string{"value": "not cairn's"}}
	e.g.Expect(e.c.Create(e.ctx, cm)).To(Succeed())
}

// deleteNamespacesAtEnd removes namespaces a test made cairn create.
func (e *env) deleteNamespacesAtEnd(names ...string) {
	e.t.Cleanup(func() {
		for _, n := range names {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
			_ = e.c.Delete(context.Background(), ns)
		}
	})
}

// buildCairn builds bin/cairn into a temporary directory and returns its path.
func buildCairn(t *testing.T) string {
	t.Helper()
	builtCairn.once.Do(func() { builtCairn.path, builtCairn.err = goBuildCairn(t) })
	if builtCairn.err != nil {
		t.Fatal(builtCairn.err)
	}
	return builtCairn.path
}

// builtCairn is the cairn binary of this test binary, built once (a build takes
// most of a minute on a loaded 2-core machine) and removed when the tests end.
var builtCairn struct {
	once sync.Once
	path string
	err  error
}

func goBuildCairn(t *testing.T) (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "cairn-e2e-bin-")
	if err != nil {
		return "", err
	}
	harness.AtExit(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "cairn")
	begin := time.Now()
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/cairn")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("failed to build cairn: %v\n%s", err, out)
	}
	t.Logf("built cairn in %s", time.Since(begin).Round(time.Millisecond))
	return bin, nil
}

// cairnSync is one `cairn sync --once` of a repository against a cluster.
type cairnSync struct {
	bin, repoURL, kubeconfig, cacheDir string
}

func (s cairnSync) command(ctx context.Context) (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, s.bin, "sync", "--repo", s.repoURL, "--once",
		"--kubeconfig", s.kubeconfig, "--cache-dir", s.cacheDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	return cmd, &out
}

// run runs the sync to completion and returns its output and exit error.
func (s cairnSync) run(ctx context.Context) (string, error) {
	cmd, out := s.command(ctx)
	err := cmd.Run()
	return out.String(), err
}

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Environment variables that point tests at a cluster started elsewhere
// (`set -a; . .demo/env` sets both).
const (
	EnvKubeconfig = "CAIRN_TEST_KUBECONFIG"
	EnvRegistry   = "CAIRN_TEST_REGISTRY"
)

// shared is the cluster of one test binary, started on first use.
var shared struct {
	mu      sync.Mutex
	main    bool
	opts    Options
	cluster *Cluster
	err     error
	dir     string
}

// Main runs the tests of a package with a shared cluster and exits with their
// status. The cluster is started on the first ForTest or Shared call, so test
// runs that need none (-run filters, fuzzing) pay nothing; it is stopped
// after the last test. With $CAIRN_TEST_KUBECONFIG set, that cluster is used
// instead (and $CAIRN_TEST_REGISTRY for the registry). On failure the logs
// are kept and their directory printed.
//
//	func TestMain(m *testing.M) { harness.Main(m, harness.DefaultOptions()) }
func Main(m *testing.M, opts Options) {
	shared.mu.Lock()
	shared.main, shared.opts = true, opts
	shared.mu.Unlock()
	code := m.Run()
	finishShared(code)
	runAtExit()
	os.Exit(code)
}

var atExit struct {
	mu    sync.Mutex
	funcs []func()
}

// AtExit registers f to run when Main ends, after the tests and the shared
// cluster (for what a test binary shares between its tests, as a built binary).
func AtExit(f func()) {
	atExit.mu.Lock()
	defer atExit.mu.Unlock()
	atExit.funcs = append(atExit.funcs, f)
}

func runAtExit() {
	atExit.mu.Lock()
	defer atExit.mu.Unlock()
	for _, f := range atExit.funcs {
		f()
	}
}

// ForTest returns the shared cluster of the test binary, failing t when it
// cannot be started. Without Main in TestMain, it starts a cluster
// (DefaultOptions) for t alone and stops it when t ends.
func ForTest(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	withMain := shared.main
	shared.mu.Unlock()
	if !withMain {
		return forOneTest(t)
	}
	c, err := sharedCluster()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	return c
}

// Shared returns the shared cluster of the test binary, starting it on first
// use. It panics when TestMain does not call Main or the cluster cannot start.
func Shared() *Cluster {
	c, err := sharedCluster()
	if err != nil {
		panic(fmt.Sprintf("harness: %v", err))
	}
	return c
}

func sharedCluster() (*Cluster, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		return nil, errors.New("TestMain must call harness.Main to use the shared cluster")
	}
	if shared.cluster == nil && shared.err == nil {
		shared.cluster, shared.dir, shared.err = startForTests(shared.opts)
	}
	return shared.cluster, shared.err
}

// startForTests connects to $CAIRN_TEST_KUBECONFIG or starts a cluster in a
// new temporary directory.
func startForTests(opts Options) (*Cluster, string, error) {
	if kubeconfig := os.Getenv(EnvKubeconfig); kubeconfig != "" {
		registry := os.Getenv(EnvRegistry)
		if opts.Registry && registry == "" {
			return nil, "", fmt.Errorf("%s is set but %s is not", EnvKubeconfig, EnvRegistry)
		}
		c, err := Connect(kubeconfig, registry)
		return c, "", err
	}
	sweepStaleDirs()
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return nil, "", fmt.Errorf("failed to create the cluster directory: %w", err)
	}
	opts.Dir, opts.Detached = dir, false
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		return nil, dir, fmt.Errorf("failed to start the test cluster (logs in %s): %w", filepath.Join(dir, "logs"), err)
	}
	return c, dir, nil
}

// finishShared stops the shared cluster and removes its directory, keeping
// the logs when the tests failed.
func finishShared(code int) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir == "" {
		return
	}
	if code == 0 && shared.err == nil {
		_ = os.RemoveAll(shared.dir)
		return
	}
	for _, sub := range []string{"etcd", "registry"} {
		_ = os.RemoveAll(filepath.Join(shared.dir, sub))
	}
	fmt.Fprintf(os.Stderr, "harness: cluster logs kept in %s\n", filepath.Join(shared.dir, "logs"))
}

// tempPrefix names the temporary directories of test clusters.
const tempPrefix = "cairn-harness-"

// sweepStaleDirs removes the data (not the logs) of test clusters left behind
// by test binaries that were killed (timeout panics): directories older than
// ten minutes with no live process.
func sweepStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < 10*time.Minute || refuseRunning(dir) != nil {
			continue
		}
		for _, sub := range []string{"etcd", "registry"} {
			_ = os.RemoveAll(filepath.Join(dir, sub))
		}
	}
}

func forOneTest(t testing.TB) *Cluster {
	t.Helper()
	if kubeconfig := os.Getenv(EnvKubeconfig); kubeconfig != "" {
		c, err := Connect(kubeconfig, os.Getenv(EnvRegistry))
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
		return c
	}
	opts := DefaultOptions()
	opts.Dir = t.TempDir()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("harness: failed to start a cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named after t (plus a random suffix) and
// deletes it when t ends, so that tests sharing a cluster stay apart.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatalf("harness: failed to create a client: %v", err)
	}
	prefix := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.Trim(prefix[:40], "-")
	}
	if prefix == "" {
		prefix = "test"
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	ns, err = client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("harness: failed to create a namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

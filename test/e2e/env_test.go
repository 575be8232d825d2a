package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/manifests"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/test/harness"
)

// env is one test's view of the shared cluster: the engine, a client and a fresh
// namespace prefix. The Platform is a cluster singleton, so e2e tests run one at a
// time and each starts from a cluster with no cairn CRs.
type env struct {
	t       *testing.T
	g       *WithT
	ctx     context.Context
	cluster *harness.Cluster
	c       client.Client
	engine  *reconciler.Engine
	cache   string
	ns      string // unique per test, e.g. "team-x7k2"
	// progress collects the engine's progress lines, in the order the work happened.
	progress *lockedBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	hc := harness.ForTest(t)
	return newEnvWithConfig(t, hc, hc.RESTConfig)
}

func installCRDs(t *testing.T, ctx context.Context, cluster *reconciler.Cluster) {
	t.Helper()
	m, err := cluster.Manager("", "")
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	entries, _ := manifests.CRDs.ReadDir("crds")
	for _, e := range entries {
		b, _ := manifests.CRDs.ReadFile("crds/" + e.Name())
		u := &unstructured.Unstructured{}
		if err := yamlToObject(b, u); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(reconciler.DefaultNamespace) // as cairn install does: the sync Lease lives there
	if _, err := m.ApplyAllStaged(ctx, append(objs, ns), ssaDefaults()); err != nil {
		t.Fatal(err)
	}
}

// reset deletes every cairn CR so the test starts from a clean Platform.
func (e *env) reset() {
	e.t.Helper()
	var mis cairnv1.ModuleInstanceList
	e.g.Expect(e.c.List(e.ctx, &mis)).To(Succeed())
	for i := range mis.Items {
		e.g.Expect(client.IgnoreNotFound(e.c.Delete(e.ctx, &mis.Items[i]))).To(Succeed())
	}
	p := &cairnv1.Platform{}
	p.Name = cairnv1.PlatformName
	e.g.Expect(client.IgnoreNotFound(e.c.Delete(e.ctx, p))).To(Succeed())
}

// sync runs one sync of the repository's branch head, as `cairn sync --once` does.
func (e *env) sync(repo *gitRepo) *reconciler.SyncResult {
	e.t.Helper()
	res, err := e.trySync(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	return res
}

func (e *env) trySync(repo *gitRepo) (*reconciler.SyncResult, error) {
	rev, err := e.revision(repo)
	if err != nil {
		return nil, err
	}
	return e.engine.Sync(e.ctx, rev)
}

// revision reads the branch head of repo with the diff against the last synced revision.
func (e *env) revision(repo *gitRepo) (reconciler.Revision, error) {
	src, err := gitsource.New(gitsource.Options{URL: repo.url(), CacheDir: filepath.Join(e.cache, "git")})
	if err != nil {
		return reconciler.Revision{}, err
	}
	head, err := src.Head(e.ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	base, err := e.engine.LastSynced(e.ctx)
	if err != nil {
		return reconciler.Revision{}, err
	}
	return reconciler.ReadRevision(e.ctx, src, head, base)
}

// result returns the result of one instance.
func result(res *reconciler.SyncResult, ns, name string) reconciler.InstanceResult {
	for _, i := range res.Instances {
		if i.Namespace == ns && i.Name == name {
			return i
		}
	}
	return reconciler.InstanceResult{Action: "Missing"}
}

// get reads an object; nil when it does not exist.
func (e *env) get(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	return u
}

// gone reports whether the object is deleted or being deleted.
func (e *env) gone(apiVersion, kind, ns, name string) bool {
	u := e.get(apiVersion, kind, ns, name)
	return u == nil || u.GetDeletionTimestamp() != nil
}

func (e *env) instance(ns, name string) *cairnv1.ModuleInstance {
	e.t.Helper()
	mi := &cairnv1.ModuleInstance{}
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, mi)
	if apierrors.IsNotFound(err) {
		return nil
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	return mi
}

func (e *env) configMap(ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		return nil
	}
	return cm
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }

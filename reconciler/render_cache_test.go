package reconciler

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/render"
)

func TestRenderCacheKeyCoversInputs(t *testing.T) {
	g := NewWithT(t)
	base := render.Request{Name: "a", Namespace: "ns", Values: []byte(`{"x":1}`)}
	key := cacheKey(base, "sha256:m1")
	g.Expect(cacheKey(base, "sha256:m1")).To(Equal(key))
	for _, other := range []string{
		cacheKey(base, "sha256:m2"),
		cacheKey(render.Request{Name: "b", Namespace: "ns", Values: base.Values}, "sha256:m1"),
		cacheKey(render.Request{Name: "a", Namespace: "ns", Values: []byte(`{"x":2}`)}, "sha256:m1"),
		cacheKey(render.Request{Name: "a", Namespace: "ns", Values: base.Values, Catalogs: []render.Catalog{{Module: "c@v0", Version: "v0.1.0"}}}, "sha256:m1"),
	} {
		g.Expect(other).NotTo(Equal(key))
	}
}

func TestRenderCacheSurvivesRestartAndHandsOutCopies(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("x")
	c := newRenderCache(dir)
	c.put("abcd", &render.Result{Objects: []*unstructured.Unstructured{u}, Digest: "sha256:d"})

	got := c.get("abcd")
	got.Objects[0].SetName("changed")
	g.Expect(c.get("abcd").Objects[0].GetName()).To(Equal("x"), "callers get copies")

	restarted := newRenderCache(dir)
	again := restarted.get("abcd")
	g.Expect(again).NotTo(BeNil())
	g.Expect(again.Digest).To(Equal("sha256:d"))
	g.Expect(again.Objects[0].GetKind()).To(Equal("ConfigMap"))
	g.Expect(newRenderCache("").get("abcd")).To(BeNil())
}

func TestRenderCacheKeepsSecretsOffDisk(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetName("db")
	_ = unstructured.SetNestedField(secret.Object, "hunter2-password", "stringData", "password")
	c := newRenderCache(dir)
	c.put("ef01", &render.Result{Objects: []*unstructured.Unstructured{secret}, Digest: "sha256:s"})
	g.Expect(c.get("ef01")).NotTo(BeNil(), "kept in memory")
	g.Expect(newRenderCache(dir).get("ef01")).To(BeNil(), "not on disk: a restart renders again")
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty())
}

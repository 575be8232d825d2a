package rendercache

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/cairn/internal/testobj"
	"cairn.dev/cairn/render"
)

func TestRenderCacheKeyCoversInputs(t *testing.T) {
	g := NewWithT(t)
	base := render.Request{Name: "a", Namespace: "ns", Values: []byte(`{"x":1}`)}
	key := Key("dev", base, "sha256:m1")
	g.Expect(Key("dev", base, "sha256:m1")).To(Equal(key))
	for _, other := range []string{
		Key("dev", base, "sha256:m2"),
		Key("dev", render.Request{Name: "b", Namespace: "ns", Values: base.Values}, "sha256:m1"),
		Key("dev", render.Request{Name: "a", Namespace: "ns", Values: []byte(`{"x":2}`)}, "sha256:m1"),
		Key("dev", render.Request{Name: "a", Namespace: "ns", Values: base.Values, Catalogs: []render.Catalog{{Module: "c@v0", Version: "v0.1.0"}}}, "sha256:m1"),
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
	c := New(dir)
	c.Put("abcd", &render.Result{Objects: []*unstructured.Unstructured{u}, Digest: "sha256:d"})

	got := c.Get("abcd")
	got.Objects[0].SetName("changed")
	g.Expect(c.Get("abcd").Objects[0].GetName()).To(Equal("x"), "callers get copies")

	restarted := New(dir)
	again := restarted.Get("abcd")
	g.Expect(again).NotTo(BeNil())
	g.Expect(again.Digest).To(Equal("sha256:d"))
	g.Expect(again.Objects[0].GetKind()).To(Equal("ConfigMap"))
	g.Expect(New("").Get("abcd")).To(BeNil())
}

// The memory keeps the last memEntriesOnDisk renders that the directory keeps too
// (the others are read back from disk), and the last memEntries of those it keeps
// alone: without a directory, or holding a Secret, which never lands on disk.
func TestRenderCacheMemoryBound(t *testing.T) {
	g := NewWithT(t)
	put := func(c *Cache, prefix, kind string, n int) {
		for i := range n {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind(kind)
			u.SetName(fmt.Sprintf("%s-%d", prefix, i))
			c.Put(fmt.Sprintf("%s%04d", prefix, i), &render.Result{Objects: []*unstructured.Unstructured{u}, Digest: "sha256:d"})
		}
	}
	withDir := New(t.TempDir())
	put(withDir, "cm", "ConfigMap", memEntries)
	g.Expect(withDir.mem).To(HaveLen(memEntriesOnDisk))
	g.Expect(withDir.mem).To(HaveKey(fmt.Sprintf("cm%04d", memEntries-1)))
	g.Expect(withDir.mem).NotTo(HaveKey("cm0000"))
	first := withDir.Get("cm0000")
	g.Expect(first).NotTo(BeNil(), "read back from disk")
	g.Expect(first.Objects[0].GetName()).To(Equal("cm-0"))
	g.Expect(withDir.mem).To(HaveLen(memEntriesOnDisk))

	// Renders that hold a Secret stay in memory only, up to memEntries, beside the
	// others: a fleet of more than memEntriesOnDisk of them is not rendered again.
	put(withDir, "s", "Secret", memEntries)
	g.Expect(withDir.mem).To(HaveLen(memEntriesOnDisk + memEntries))
	for i := range memEntries {
		g.Expect(withDir.Get(fmt.Sprintf("s%04d", i))).NotTo(BeNil())
	}
	put(withDir, "t", "Secret", 1)
	g.Expect(withDir.Get("s0000")).To(BeNil(), "the oldest in memory only is gone: it was never on disk")
	g.Expect(withDir.mem).To(HaveKey("cm0000"), "those on disk are bounded apart: none was pushed out")

	memOnly := New("")
	put(memOnly, "cm", "ConfigMap", memEntries+1)
	g.Expect(memOnly.mem).To(HaveLen(memEntries))
	g.Expect(memOnly.Get("cm0000")).To(BeNil(), "the oldest is gone with no directory")
	g.Expect(memOnly.Get("cm0001")).NotTo(BeNil())
}

func TestRenderCacheKeepsSecretsOffDisk(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetName("db")
	_ = unstructured.SetNestedField(secret.Object, "hunter2-password", "stringData", "password")
	c := New(dir)
	c.Put("ef01", &render.Result{Objects: []*unstructured.Unstructured{secret}, Digest: "sha256:s"})
	g.Expect(c.Get("ef01")).NotTo(BeNil(), "kept in memory")
	g.Expect(New(dir).Get("ef01")).To(BeNil(), "not on disk: a restart renders again")
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(BeEmpty())
}

// TestRenderCacheHooks: a chart's hooks come back from memory and disk as copies, and
// a Secret among the hooks keeps the render off disk too.
func TestRenderCacheHooks(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	job := testobj.Object("batch/v1", "Job", "team-a", "migrate")
	c := New(dir)
	c.Put("aa01", &render.Result{Digest: "sha256:h", Hooks: []render.Hook{{Object: job, Events: []string{render.HookPreInstall}, Weight: 2}}})
	got := c.Get("aa01")
	got.Hooks[0].Object.SetName("changed")
	g.Expect(c.Get("aa01").Hooks[0].Object.GetName()).To(Equal("migrate"), "callers get copies")
	again := New(dir).Get("aa01")
	g.Expect(again.Hooks).To(HaveLen(1))
	g.Expect(again.Hooks[0].Weight).To(Equal(2))
	g.Expect(again.Hooks[0].Object.GetKind()).To(Equal("Job"))

	secret := testobj.Object("v1", "Secret", "team-a", "setup")
	c.Put("bb02", &render.Result{Digest: "sha256:s", Hooks: []render.Hook{{Object: secret, Events: []string{render.HookPreInstall}}}})
	g.Expect(c.Get("bb02")).NotTo(BeNil(), "kept in memory")
	g.Expect(New(dir).Get("bb02")).To(BeNil(), "a hook Secret is never written to disk")
}

// TestRenderCacheKeyCoversEveryRequestField: every field of render.Request (and of its
// registry) changes the key, but the tree, the cache directory, the tenant (which
// decides when a render runs, not what it renders) and the registry's credentials,
// verifier and timeout do not; a field added later is covered by default.
func TestRenderCacheKeyCoversEveryRequestField(t *testing.T) {
	g := NewWithT(t)
	base := render.Request{Name: "a", Namespace: "ns", Registry: &render.ModuleRegistry{Host: "r.example.com"}}
	key := Key("dev", base, "m")
	ignored := map[string]bool{"Source": true, "CacheDir": true, "Tenant": true}
	rt := reflect.TypeOf(base)
	for i := range rt.NumField() {
		f := rt.Field(i)
		req := base
		req.Registry = &render.ModuleRegistry{Host: "r.example.com"}
		setNonZero(reflect.ValueOf(&req).Elem().Field(i))
		if ignored[f.Name] {
			g.Expect(Key("dev", req, "m")).To(Equal(key), "field %s is not part of the key", f.Name)
			continue
		}
		g.Expect(Key("dev", req, "m")).NotTo(Equal(key), "field %s changes the key", f.Name)
	}
	secretFree := map[string]bool{"Username": true, "Password": true, "Verifier": true, "Timeout": true}
	regType := reflect.TypeOf(render.ModuleRegistry{})
	for i := range regType.NumField() {
		f := regType.Field(i)
		req := base
		reg := *base.Registry
		setNonZero(reflect.ValueOf(&reg).Elem().Field(i))
		req.Registry = &reg
		if secretFree[f.Name] {
			g.Expect(Key("dev", req, "m")).To(Equal(key), "registry field %s is not part of the key", f.Name)
			continue
		}
		g.Expect(Key("dev", req, "m")).NotTo(Equal(key), "registry field %s changes the key", f.Name)
	}
	withCaps := base
	withCaps.Capabilities = &render.Capabilities{}
	capsKey := Key("dev", withCaps, "m")
	capsType := reflect.TypeOf(render.Capabilities{})
	for i := range capsType.NumField() {
		req := withCaps
		caps := render.Capabilities{}
		setNonZero(reflect.ValueOf(&caps).Elem().Field(i))
		req.Capabilities = &caps
		g.Expect(Key("dev", req, "m")).NotTo(Equal(capsKey), "capabilities field %s changes the key", capsType.Field(i).Name)
	}
	g.Expect(Key("dev", base, "m2")).NotTo(Equal(key))
	expectTimoniFieldsInKey(g, base)
}

// expectTimoniFieldsInKey: every field of a Timoni module changes the key (its path,
// digest, module version and Kubernetes version, the tags of its build), except its
// pulled files, which its digest stands for.
func expectTimoniFieldsInKey(g Gomega, base render.Request) {
	base.Timoni = &render.TimoniModule{}
	key := Key("dev", base, "m")
	rt := reflect.TypeOf(render.TimoniModule{})
	for i := range rt.NumField() {
		req := base
		m := render.TimoniModule{}
		setNonZero(reflect.ValueOf(&m).Elem().Field(i))
		req.Timoni = &m
		if rt.Field(i).Name == "Files" {
			g.Expect(Key("dev", req, "m")).To(Equal(key), "the files of a Timoni module are its digest")
			continue
		}
		g.Expect(Key("dev", req, "m")).NotTo(Equal(key), "Timoni field %s changes the key", rt.Field(i).Name)
	}
}

// TestChartRenderCacheKeyFollowsCapabilities: a chart render of one request is cached
// per capabilities (a newly served API version is a new key), and is the same key for
// the same capabilities.
func TestChartRenderCacheKeyFollowsCapabilities(t *testing.T) {
	g := NewWithT(t)
	caps := func(apis ...string) *render.Capabilities {
		return &render.Capabilities{KubeVersion: "v1.37.2", APIVersions: apis}
	}
	req := render.Request{Name: "web", Namespace: "team-a", Capabilities: caps("v1", "apps/v1")}
	key := Key("dev", req, "chart:oci://r/c@sha256:1")
	req.Capabilities = caps("v1", "apps/v1")
	g.Expect(Key("dev", req, "chart:oci://r/c@sha256:1")).To(Equal(key))
	req.Capabilities = caps("v1", "apps/v1", "monitoring.coreos.com/v1/ServiceMonitor")
	g.Expect(Key("dev", req, "chart:oci://r/c@sha256:1")).NotTo(Equal(key))
	req.Capabilities = &render.Capabilities{KubeVersion: "v1.38.0", APIVersions: []string{"v1", "apps/v1"}}
	g.Expect(Key("dev", req, "chart:oci://r/c@sha256:1")).NotTo(Equal(key))
}

// setNonZero gives v a value other than its zero value.
func setNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`{"x":1}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setNonZero(s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		setNonZero(p.Elem())
		v.Set(p)
	case reflect.Struct:
		setNonZero(v.Field(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setNonZero(k)
		setNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		for _, impl := range []any{fakeFS{}, fakeVerifier{}} {
			if reflect.TypeOf(impl).Implements(v.Type()) {
				v.Set(reflect.ValueOf(impl))
			}
		}
	}
}

type fakeFS struct{}

func (fakeFS) Open(string) (fs.File, error) { return nil, fs.ErrNotExist }

type fakeVerifier struct{ Key string }

func (fakeVerifier) ResolveVerified(context.Context, string, string, string) (string, error) {
	return "", nil
}

package e2e

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// explodeModule is a CUE module whose value doubles in size at each of 30 levels:
// 16 bytes, then 16 GiB.
func explodeModule() string {
	var b strings.Builder
	b.WriteString("package explode\n\ninstance: {name: string, namespace: string}\nvalues: {}\n")
	b.WriteString(`_s0: "0123456789abcdef"` + "\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "_s%d: _s%d + _s%d\n", i, i-1, i-1)
	}
	b.WriteString(`objects: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name, data: n: "\(len(_s30))"}` + "\n")
	return b.String()
}

// platformWithLimits is the Platform of platformYAML with spec.limits.
func platformWithLimits(limits string) string {
	return platformYAML("") + "  limits: {" + limits + "}\n"
}

// expectLimitExceeded checks that the CR of the failed instance name says so.
func (e *env) expectLimitExceeded(name string) {
	e.t.Helper()
	mi := e.instance(e.ns, name)
	e.g.Expect(mi).NotTo(BeNil())
	e.g.Expect(isTrue(mi, "Ready")).To(BeFalse())
	e.g.Expect(isTrue(mi, "Stalled")).To(BeTrue())
	e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(cairnv1.ReasonLimitExceeded))
}

// TestRenderMemoryBudgetStopsOnlyTheExplodingInstance: an author's module that explodes
// in memory, under renderMemory: 128Mi, fails that instance with LimitExceeded within
// seconds, while the other instance of the same sync is applied and Ready, and cairn
// (this process) never holds the explosion.
func TestRenderMemoryBudgetStopsOnlyTheExplodingInstance(t *testing.T) {
	e := newEnv(t)
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	files := appRepo("", a)
	files["platform.yaml"] = platformWithLimits("renderMemory: 128Mi")
	files["modules/explode/explode.cue"] = explodeModule()
	files["instances/bomb.yaml"] = localInstanceYAML("bomb", e.ns, "./modules/explode", "{}")
	repo := newGitRepo(t, files)

	start := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 45*time.Second))
	e.expectFailure(res, wantFailure{name: "bomb", reason: cairnv1.ReasonLimitExceeded,
		contains: []string{"failed to render {ns}/bomb", "memory budget (renderMemory) of 128 MiB"}})
	e.expectLimitExceeded("bomb")
	e.g.Expect(conditions.GetMessage(e.instance(e.ns, "bomb"), "Ready")).To(ContainSubstring("memory budget (renderMemory) of 128 MiB"))
	e.g.Expect(e.configMap(e.ns, "bomb")).To(BeNil())

	e.g.Expect(result(res, e.ns, "a").Action).NotTo(BeEquivalentTo("Failed"))
	e.g.Expect(isTrue(e.instance(e.ns, "a"), "Ready")).To(BeTrue())
	e.expectLastGood("a", res.Revision, "x")

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.g.Expect(ms.HeapAlloc).To(BeNumerically("<", 1<<30), "cairn's own heap holds the explosion")
}

// TestRenderMemoryCapOfTheController: a Platform's renderMemory above the budget
// the controller gives each render worker (--render-memory, here 128Mi) is lowered
// to it: the exploding instance fails with LimitExceeded at 128 MiB, the message
// naming both figures, and the other instance is Ready.
func TestRenderMemoryCapOfTheController(t *testing.T) {
	e := newEnv(t)
	e.withRenderer(render.RendererOptions{MaxEvaluations: 2, MaxWorkerMemory: 128 << 20})
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	files := appRepo("", a)
	files["platform.yaml"] = platformWithLimits("renderMemory: 2Gi")
	files["modules/explode/explode.cue"] = explodeModule()
	files["instances/bomb.yaml"] = localInstanceYAML("bomb", e.ns, "./modules/explode", "{}")
	repo := newGitRepo(t, files)

	start := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 45*time.Second))
	e.expectFailure(res, wantFailure{name: "bomb", reason: cairnv1.ReasonLimitExceeded, contains: []string{
		"memory budget (renderMemory) of 128 MiB", "renderMemory asks for 2048 MiB, more than the 128 MiB this cairn gives a render worker"}})
	e.expectLimitExceeded("bomb")
	e.g.Expect(isTrue(e.instance(e.ns, "a"), "Ready")).To(BeTrue())
	e.expectLastGood("a", res.Revision, "x")
}

// withRenderer replaces the engine by one whose renderer has options ro.
func (e *env) withRenderer(ro render.RendererOptions) {
	e.t.Helper()
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(e.cache, "modules")
	opts.DefaultTimeout = time.Minute
	opts.Progress = e.progress
	renderer := render.NewRendererWithOptions(ro)
	e.t.Cleanup(func() { _ = renderer.Close() })
	e.engine = reconciler.New(cluster, renderer, opts)
}

// TestModuleBytesCountOnlyFilesARenderReads: a 50 MB blob beside a module's CUE files
// is never read by the render and does not count against maxModuleBytes (even 64Ki);
// a module whose CUE files exceed it fails with LimitExceeded naming the module and
// the cap, and only that instance fails.
func TestModuleBytesCountOnlyFilesARenderReads(t *testing.T) {
	e := newEnv(t)
	source := gitsource.Limits{MaxFileBytes: 64 << 20, MaxTotalBytes: 256 << 20}
	a := inst{name: "a", ns: e.ns, replicas: 0, configs: configs("x")}
	files := appRepo("", a)
	files["modules/app/blob.bin"] = strings.Repeat("cairn blob ", 5_000_000) // 55 MB
	repo := newGitRepo(t, files)
	res, err := e.trySyncLimited(repo, source)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.expectLastGood("a", res.Revision, "x")

	big := "package big\n\ninstance: {name: string, namespace: string}\nvalues: {}\n" +
		"objects: cm: {apiVersion: \"v1\", kind: \"ConfigMap\", metadata: name: instance.name}\n" +
		"// " + strings.Repeat("x", 70<<10) + "\n"
	repo.commit("tight module cap, a big module", map[string]string{
		"platform.yaml":           platformWithLimits("maxModuleBytes: 64Ki"),
		"modules/big/big.cue":     big,
		"instances/big.yaml":      localInstanceYAML("big", e.ns, "./modules/big", "{}"),
		"instances/a.yaml":        a.yaml(),
		"modules/app/README.md":   "not read by any render\n",
		"modules/big/notes.txt":   "not read either\n",
		"instances/unrelated.txt": "x\n",
	})
	res, err = e.trySyncLimited(repo, source)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.expectFailure(res, wantFailure{name: "big", reason: cairnv1.ReasonLimitExceeded,
		contains: []string{`module "modules/big" is too large`, "maxModuleBytes (65536 bytes)"}})
	e.expectLimitExceeded("big")
	e.g.Expect(result(res, e.ns, "a").Action).NotTo(BeEquivalentTo("Failed"), "%+v", result(res, e.ns, "a"))
	e.expectLastGood("a", res.Revision, "x")
}

package render

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	. "github.com/onsi/gomega"
)

// nestedBases is a kustomize directory nested/0 whose every level includes the
// next one twice (two overlays with a name prefix each), depth levels deep: a
// build of 2^depth copies of one ConfigMap, whose time grows about fourfold per
// level past ten (depth 12: 40 s on one core) while its memory stays modest. A
// handful of such bases held every build slot of an in-process build.
func nestedBases(depth int) fstest.MapFS {
	tree := fstest.MapFS{}
	for i := range depth {
		tree[fmt.Sprintf("nested/%d/kustomization.yaml", i)] = &fstest.MapFile{Data: []byte("resources: [a, b]\n")}
		for _, side := range []string{"a", "b"} {
			tree[fmt.Sprintf("nested/%d/%s/kustomization.yaml", i, side)] = &fstest.MapFile{
				Data: fmt.Appendf(nil, "namePrefix: %s-\nresources: [../../%d]\n", side, i+1)}
		}
	}
	tree[fmt.Sprintf("nested/%d/cm.yaml", depth)] = &fstest.MapFile{Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leaf}\n")}
	return tree
}

// withTree is tree with the files of more added.
func withTree(tree, more fstest.MapFS) fstest.MapFS {
	for p, f := range more {
		tree[p] = f
	}
	return tree
}

// TestKustomizeBuildsInAWorkerAsInProcess: a Renderer builds a kustomize
// directory in its worker process, to the objects, digests and errors of the
// in-process build.
func TestKustomizeBuildsInAWorkerAsInProcess(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	for _, dir := range []string{"apps/prod", "plain"} {
		req := Request{Name: "podinfo", Namespace: "team-a", Source: kustomizeTree(), KustomizePath: dir}
		want, err := RenderKustomize(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := r.Render(context.Background(), req)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objectsJSON(t, got)).To(Equal(objectsJSON(t, want)), dir)
		g.Expect(got.Digest).To(Equal(want.Digest), dir)
		g.Expect(got.ModuleDigest).To(Equal(want.ModuleDigest), dir)
	}
	g.Expect(r.pool.pids()).To(HaveLen(1), "built in the worker")

	tree := withTree(kustomizeTree(), fstest.MapFS{"bad/kustomization.yaml": {Data: []byte("resources: [missing.yaml]\n")}})
	_, err := r.Render(context.Background(), Request{Source: tree, KustomizePath: "bad"})
	g.Expect(Reason(err)).To(Equal(ReasonRenderFailed))
	g.Expect(err.Error()).To(And(HavePrefix("kustomize directory bad: "), ContainSubstring("missing.yaml")))
	_, err = r.Render(context.Background(), Request{Source: kustomizeTree(), KustomizePath: "plain", Limits: Limits{MaxObjects: 2}})
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded))
}

// TestKustomizeBuildPastItsDeadlineIsStopped: a build of deeply nested bases
// that would run for minutes ends with RenderTimeout at its deadline; its worker
// process is killed, and the next build takes the freed place at once.
func TestKustomizeBuildPastItsDeadlineIsStopped(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	tree := withTree(kustomizeTree(), nestedBases(16))
	start := time.Now()
	_, err := r.Render(context.Background(), Request{Source: tree, KustomizePath: "nested/0", Limits: Limits{Timeout: 2 * time.Second}})
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
	g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
	g.Expect(err.Error()).To(And(HavePrefix("kustomize directory nested/0: "), ContainSubstring("its worker process was stopped")))
	g.Expect(r.pool.pids()).To(BeEmpty(), "the worker was killed")

	start = time.Now()
	res, err := r.Render(context.Background(), Request{Namespace: "team-a", Source: tree, KustomizePath: "apps/prod", Limits: Limits{Timeout: 5 * time.Second}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(3))
}

// TestKustomizeBuildHasAMemoryBudget: a build that grows past its render's
// memory budget (256 copies of a generated ConfigMap of 512 KiB under 64 MiB)
// fails with LimitExceeded and stops its worker.
func TestKustomizeBuildHasAMemoryBudget(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 1})
	defer r.Close()
	tree := nestedBases(8)
	tree["nested/8/kustomization.yaml"] = &fstest.MapFile{Data: []byte("configMapGenerator:\n- {name: big, files: [big.txt]}\n")}
	tree["nested/8/big.txt"] = &fstest.MapFile{Data: []byte(strings.Repeat("0123456789abcdef", 32<<10))}
	_, err := r.Render(context.Background(), Request{Source: tree, KustomizePath: "nested/0",
		Limits: Limits{Timeout: time.Minute, Memory: 64 << 20}})
	g.Expect(Reason(err)).To(Equal(ReasonLimitExceeded), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("memory budget (renderMemory) of 64 MiB"))
	g.Expect(r.pool.pids()).To(BeEmpty(), "the worker was stopped")
}

// TestOneTenantsSlowBuildsDoNotStarveAnother: with two worker places, tenant
// attacker's three builds of nested bases (deadline 8 s) never hold both: the
// victim's small build, started after them, is done within seconds; each
// attacker build times out, and one that waited for a place until its deadline
// says the workers were busy.
func TestOneTenantsSlowBuildsDoNotStarveAnother(t *testing.T) {
	g := NewWithT(t)
	r := NewRendererWithOptions(RendererOptions{MaxEvaluations: 2})
	defer r.Close()
	tree := withTree(kustomizeTree(), nestedBases(16))
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = r.Render(context.Background(), Request{Source: tree, KustomizePath: "nested/0", Tenant: "attacker",
				Limits: Limits{Timeout: 8 * time.Second}})
		})
	}
	g.Eventually(func() int { return r.pool.slots.Held("attacker") }).Should(Equal(1))
	var most atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				most.Store(max(most.Load(), int64(r.pool.slots.Held("attacker"))))
			}
		}
	}()
	start := time.Now()
	res, err := r.Render(context.Background(), Request{Namespace: "team-b", Source: tree, KustomizePath: "apps/prod", Tenant: "victim",
		Limits: Limits{Timeout: 8 * time.Second}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Objects).To(HaveLen(3))
	g.Expect(time.Since(start)).To(BeNumerically("<", 6*time.Second))
	wg.Wait()
	close(stop)
	g.Expect(most.Load()).To(Equal(int64(1)), "the attacker never held both places")
	busy := 0
	for _, err := range errs {
		g.Expect(Reason(err)).To(Equal(ReasonRenderTimeout))
		if errors.Is(err, ErrWorkersBusy) {
			busy++
		}
	}
	g.Expect(busy).To(BeNumerically(">=", 1), "one attacker build ran (and was stopped), the others waited: %v", errs)
}

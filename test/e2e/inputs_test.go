package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/test/harness"
)

// writes keeps the requests that would change something (dry-runs change nothing).
func writes(r loggedRequest) bool {
	return r.method != http.MethodGet && !r.dryRun
}

// TestTheRevisionStepWritesOnlyTheInputsThatChanged: the revision step hands each
// instance its input through its CR (the spec from Git and the cairn.dev/input-digest
// and cairn.dev/input-revision annotations), and writes only the instances whose
// input changed. A commit that changes no instance's input writes nothing but the
// revision on the Platform; a commit that changes one instance writes to that
// instance's CR and to none of the others'.
func TestTheRevisionStepWritesOnlyTheInputsThatChanged(t *testing.T) {
	e, log := newLoggedEnv(t)
	a, b, c := inst{name: "a", ns: e.ns}, inst{name: "b", ns: e.ns}, inst{name: "c", ns: e.ns}
	repo := newGitRepo(t, appRepo("", a, b, c))
	first := e.syncClean(repo)
	for _, name := range []string{"a", "b", "c"} {
		mi := e.instance(e.ns, name)
		e.g.Expect(mi.Annotations).To(HaveKeyWithValue("cairn.dev/input-revision", first))
		e.g.Expect(mi.Annotations).To(HaveKeyWithValue("cairn.dev/input-digest", mi.Status.LastAttemptedInput),
			"the attempt records the input it synced")
	}

	mark := time.Now()
	repo.commit("docs only", map[string]string{"README.md": "changed, and no declaration reads it\n"})
	e.syncClean(repo)
	var paths []string
	for _, r := range log.since(mark, writes) {
		paths = append(paths, r.method+" "+r.path)
	}
	e.g.Expect(paths).NotTo(BeEmpty(), "the revision is recorded on the Platform")
	for _, p := range paths {
		e.g.Expect(p).To(ContainSubstring("/platforms/"), "a commit that changes no input writes nothing but the Platform's status: %v", paths)
	}

	mark = time.Now()
	b.replicas = 1
	second := repo.commit("b scales", map[string]string{"instances/b.yaml": b.yaml()})
	e.syncClean(repo)
	touched := map[string]bool{}
	for _, r := range log.since(mark, writes) {
		if strings.Contains(r.path, "/moduleinstances/") {
			touched[resourceOf(strings.TrimSuffix(r.path, "/status"))] = true
		}
	}
	e.g.Expect(touched).To(Equal(map[string]bool{"moduleinstances/b": true}), "only b's CR is written")
	e.g.Expect(e.instance(e.ns, "b").Annotations).To(HaveKeyWithValue("cairn.dev/input-revision", second))
	e.g.Expect(e.instance(e.ns, "a").Annotations).To(HaveKeyWithValue("cairn.dev/input-revision", first),
		"an instance whose input did not change keeps the revision its input was written at")
}

// countingRenderer counts the renders it is asked for.
type countingRenderer struct {
	reconciler.Renderer
	n atomic.Int32
}

func (c *countingRenderer) Render(ctx context.Context, req render.Request) (*render.Result, error) {
	c.n.Add(1)
	return c.Renderer.Render(ctx, req)
}

// TestTheRevisionStepRendersNothing: PrepareRevision writes the inputs of the
// affected instances into their CRs and renders none of them; the renders come with
// the instance reconciles, each of which renders its own instance (one reconciled
// alone renders nothing else).
func TestTheRevisionStepRendersNothing(t *testing.T) {
	e := newEnv(t)
	cluster, err := reconciler.NewCluster(harness.ForTest(t).RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	renderer := &countingRenderer{Renderer: render.NewRenderer()}
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(t.TempDir(), "modules")
	engine := reconciler.New(cluster, renderer, opts)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns}, inst{name: "b", ns: e.ns}))
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())

	st, err := engine.PrepareRevision(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(renderer.n.Load()).To(BeZero(), "the revision step renders nothing")
	for _, name := range []string{"a", "b"} {
		mi := e.instance(e.ns, name)
		e.g.Expect(mi.Annotations).To(HaveKeyWithValue("cairn.dev/input-revision", rev.SHA), "its input is written")
		e.g.Expect(mi.Status.LastAppliedRevision).To(BeEmpty(), "nothing is applied yet")
		e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, name)).To(BeTrue())
	}

	out := st.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(out.Result.Ready).To(BeTrue(), "%+v", out)
	e.g.Expect(renderer.n.Load()).To(BeEquivalentTo(1), "an instance reconcile renders its own instance alone")
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeFalse())
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "b")).To(BeTrue())

	st.ReconcileAll(e.ctx)
	res, err := st.Finish(e.ctx)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(renderer.n.Load()).To(BeEquivalentTo(2), "each instance rendered once, by the reconciles")
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeFalse())
}

// slowRenderer holds the render of one instance until released, or for at most 25 s
// (the slow tenant's render, well within its 30 s deadline).
type slowRenderer struct {
	reconciler.Renderer
	slow     string
	release  chan struct{}
	finished atomic.Bool
}

func (s *slowRenderer) Render(ctx context.Context, req render.Request) (*render.Result, error) {
	if req.Name == s.slow {
		select {
		case <-s.release:
		case <-time.After(25 * time.Second):
		case <-ctx.Done():
		}
		defer s.finished.Store(true)
	}
	return s.Renderer.Render(ctx, req)
}

// TestASlowRenderDelaysNoOtherInstance: one instance's render takes 25 s beside 20
// instances that render at once; the 20 are applied and Ready while it is still
// rendering, and it is applied once its render is done.
func TestASlowRenderDelaysNoOtherInstance(t *testing.T) {
	e := newEnv(t)
	cluster, err := reconciler.NewCluster(harness.ForTest(t).RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	renderer := &slowRenderer{Renderer: render.NewRenderer(), slow: "slow", release: make(chan struct{})}
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(t.TempDir(), "modules")
	engine := reconciler.New(cluster, renderer, opts)
	insts := []inst{{name: "slow", ns: e.ns}}
	var fast []string
	for i := range 20 {
		name := fmt.Sprintf("fast-%02d", i)
		fast = append(fast, name)
		insts = append(insts, inst{name: name, ns: e.ns})
	}
	repo := newGitRepo(t, appRepo("", insts...))
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	st, err := engine.PrepareRevision(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())

	done := make(chan struct{})
	go func() {
		defer close(done)
		st.ReconcileAll(e.ctx)
	}()
	e.g.Eventually(func() []string {
		var notReady []string
		for _, name := range fast {
			if mi := e.instance(e.ns, name); mi == nil || !apimeta.IsStatusConditionTrue(mi.Status.Conditions, "Ready") {
				notReady = append(notReady, name)
			}
		}
		return notReady
	}, 25*time.Second, 100*time.Millisecond).Should(BeEmpty(), "the fast instances are Ready while the slow one renders")
	e.g.Expect(renderer.finished.Load()).To(BeFalse(), "the slow render is still running")
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "slow")).To(BeTrue(), "the slow instance is not applied before its render is done")
	close(renderer.release)
	<-done
	res, err := st.Finish(e.ctx)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(apimeta.IsStatusConditionTrue(e.instance(e.ns, "slow").Status.Conditions, "Ready")).To(BeTrue())
}

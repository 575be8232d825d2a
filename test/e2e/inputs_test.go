package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

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
// the instance reconciles.
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

	st.ReconcileAll(e.ctx)
	res, err := st.Finish(e.ctx)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	e.g.Expect(renderer.n.Load()).To(BeEquivalentTo(2), "each instance rendered once, by the reconciles")
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeFalse())
}

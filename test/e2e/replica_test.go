package e2e

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

// TestAReplicaReconcilesInstancesFromTheirCRs: the revision step writes the inputs;
// replicas that did not run it build the revision's state from the repository and
// the CRs (PrepareInstances) and reconcile instances from their CRs. An instance
// whose dependency no replica has reconciled yet waits; the dependency reconciled by
// another replica is then read from its CR. A state built before the revision step
// wrote the inputs takes none of them (the reconciler builds another). A replica whose state is at an older
// revision than an instance's CR leaves it alone, and a replica at the new revision
// prunes what left its render, the verdicts over the revision decided in its own
// process.
func TestAReplicaReconcilesInstancesFromTheirCRs(t *testing.T) {
	e := newEnv(t)
	newEngine := engines(e)
	leader := newEngine()
	a := inst{name: "a", ns: e.ns, dependsOn: []string{"b"}, configs: map[string]string{"x": "1", "y": "2"}}
	repo := newGitRepo(t, appRepo("", a, inst{name: "b", ns: e.ns}))
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	early, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	_, err = leader.PrepareRevision(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(early.HoldsInput(e.instance(e.ns, "b"))).To(BeFalse(), "a state built before the inputs were written does not take them")
	out := early.ReconcileInstance(e.ctx, e.ns+"/b")
	e.g.Expect(out.Stale).To(BeTrue(), "%+v", out)
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "b")).To(BeTrue())

	one, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	two, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	out = one.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(out.Pending).To(BeTrue(), "%+v", out)
	e.g.Expect(out.WaitsOn).To(Equal([]string{e.ns + "/b"}))
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeTrue(), "nothing of a before b")

	out = two.ReconcileInstance(e.ctx, e.ns+"/b")
	e.g.Expect(out.Result.Ready).To(BeTrue(), "%+v", out)
	out = one.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(out.Result.Ready).To(BeTrue(), "b read from its CR: %+v", out)
	e.g.Expect(e.instance(e.ns, "a").Status.LastAppliedRevision).To(Equal(rev.SHA))
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil())

	a.configs = map[string]string{"x": "1"}
	repo.commit("a drops y", map[string]string{"instances/a.yaml": a.yaml()})
	rev2, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	_, err = leader.PrepareRevision(e.ctx, rev2)
	e.g.Expect(err).NotTo(HaveOccurred())

	old, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	out = old.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(e.configMap(e.ns, "a-y")).NotTo(BeNil(), "a replica at the older revision leaves it alone: %+v", out)

	cur, err := newEngine().PrepareInstances(e.ctx, rev2)
	e.g.Expect(err).NotTo(HaveOccurred())
	out = cur.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(out.Result.Ready).To(BeTrue(), "%+v", out)
	e.g.Expect(out.Result.Pruned).To(Equal(1), "%+v", out)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil())
	e.g.Expect(e.instance(e.ns, "a").Status.LastAppliedRevision).To(Equal(rev2.SHA))
}

// TestAStateBuiltBeforeTheInputsTakesTheCRsCreatedSince: on a cold fleet the first
// reconciles build a revision's state while the revision step is still creating
// the CRs. A CR created since, holding the state's input and no status, is taken
// into that state (it planned the instance as new, as the revision step did) and
// reconciled there, not in a state built again; one at another input is not.
func TestAStateBuiltBeforeTheInputsTakesTheCRsCreatedSince(t *testing.T) {
	e := newEnv(t)
	newEngine := engines(e)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns}, inst{name: "b", ns: e.ns}))
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	early, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	early2, err := newEngine().PrepareInstances(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	_, err = newEngine().PrepareRevision(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(early.HoldsInput(e.instance(e.ns, "a"))).To(BeFalse(), "built before the CR existed")

	other := e.instance(e.ns, "b").DeepCopy()
	other.Annotations[reconciler.InputDigestAnnotation] = "sha256:another"
	e.g.Expect(early.Take(other)).To(BeFalse(), "a CR at another input is not taken")
	e.g.Expect(early.HoldsInput(e.instance(e.ns, "b"))).To(BeFalse())

	e.g.Expect(early.Take(e.instance(e.ns, "a"))).To(BeTrue())
	e.g.Expect(early.HoldsInput(e.instance(e.ns, "a"))).To(BeTrue())
	out := early.ReconcileInstance(e.ctx, e.ns+"/a")
	e.g.Expect(out.Result.Ready).To(BeTrue(), "%+v", out)
	e.g.Expect(e.instance(e.ns, "a").Status.LastAppliedRevision).To(Equal(rev.SHA))
	e.g.Expect(e.gone("apps/v1", "Deployment", e.ns, "a")).To(BeFalse())

	e.g.Expect(early2.Take(e.instance(e.ns, "a"))).To(BeFalse(), "a CR with a status is planned from it, not taken")
}

// engines makes engines of their own on the test's cluster, as replicas' are.
func engines(e *env) func() *reconciler.Engine {
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	return func() *reconciler.Engine {
		opts := reconciler.DefaultOptions()
		opts.RenderCacheDir = filepath.Join(e.t.TempDir(), "modules")
		return reconciler.New(cluster, render.NewRenderer(), opts)
	}
}

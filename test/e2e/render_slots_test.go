package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/render"
)

// nestedKustomizeBases writes under dir a kustomize directory dir/0 whose every
// level includes the next twice (two overlays with a name prefix each), depth
// levels deep: a build of 2^depth copies of one ConfigMap, whose time grows about
// fourfold per level past ten (depth 16 runs for hours) while its memory stays
// modest. A handful of them held every build slot of an in-process build.
func nestedKustomizeBases(files map[string]string, dir string, depth int) {
	for i := range depth {
		files[fmt.Sprintf("%s/%d/kustomization.yaml", dir, i)] = "resources: [a, b]\n"
		for _, side := range []string{"a", "b"} {
			files[fmt.Sprintf("%s/%d/%s/kustomization.yaml", dir, i, side)] = fmt.Sprintf("namePrefix: %s-\nresources: [../../%d]\n", side, i+1)
		}
	}
	files[fmt.Sprintf("%s/%d/cm.yaml", dir, depth)] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leaf}\n"
}

// withEngine replaces the engine by one whose renderer has options ro and whose
// options tune changes.
func (e *env) withEngine(ro render.RendererOptions, tune func(*reconciler.Options)) {
	e.t.Helper()
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = filepath.Join(e.cache, "modules")
	opts.DefaultTimeout = time.Minute
	opts.Progress = e.progress
	tune(&opts)
	renderer := render.NewRendererWithOptions(ro)
	e.t.Cleanup(func() { _ = renderer.Close() })
	e.engine = reconciler.New(cluster, renderer, opts)
}

// TestSlowKustomizeBuildsOfOneTenantCannotStarveAnother: team-a declares four
// kustomize instances over deeply nested bases (builds that would run for hours),
// team-b one small kustomize instance, in the same commit, with two render workers
// and a render deadline of 10 s; team-b's render starts a second after team-a's
// (a test hook), when they hold what they can. team-a's builds never hold every
// worker: team-b's instance is built at once (its render takes well under its
// deadline, by cairn's render metrics) and goes Ready, while team-a's fail with
// RenderTimeout (their workers killed at the deadline, or never given one). team-a's
// next commit, its bases fixed, renders and applies all four with the same engine
// and workers (no restart), and team-b's instance stays Ready.
func TestSlowKustomizeBuildsOfOneTenantCannotStarveAnother(t *testing.T) {
	e := newEnv(t)
	registry := prometheus.NewRegistry()
	metrics, err := report.NewMetricsReporter(registry)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.withEngine(render.RendererOptions{MaxEvaluations: 2}, func(o *reconciler.Options) {
		o.RenderLimits.Timeout = 10 * time.Second
		o.Metrics = metrics
	})
	nsA, nsB := e.ns+"-a", e.ns+"-b"
	e.grantNamespace(nsA, "*")
	e.grantNamespace(nsB, "*")
	files := map[string]string{"platform.yaml": platformYAML(tenantsPlatform(e.ns))}
	nestedKustomizeBases(files, "tenants/a/nested", 16)
	attackers := []string{"s1", "s2", "s3", "s4"}
	for _, name := range attackers {
		files["tenants/a/"+name+"/kustomization.yaml"] = fmt.Sprintf("namePrefix: %s-\nresources: [../nested/0]\n", name)
		files["tenants/a/"+name+".yaml"] = kustomizeInstance(name, nsA, "tenants/a/"+name) + "  serviceAccountName: deployer\n"
	}
	files["tenants/b/app/kustomization.yaml"] = "resources: [cm.yaml]\n"
	files["tenants/b/app/cm.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {x: \"1\"}\n"
	files["tenants/b/app.yaml"] = kustomizeInstance("app", nsB, "tenants/b/app") + "  serviceAccountName: deployer\n"
	repo := newGitRepo(t, files)
	victimKey := nsB + "/app"
	reset := reconciler.SetInstanceTestHook(func(phase, key string) {
		if phase == reconciler.PhaseRender && key == victimKey {
			time.Sleep(time.Second) // team-a's renders come first
		}
	})
	defer reset()

	start := time.Now()
	res := e.sync(repo)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 90*time.Second), "every render ended at its deadline")
	victim := result(res, nsB, "app")
	e.g.Expect(victim.Action).To(BeEquivalentTo("Created"), "%+v", victim)
	e.g.Expect(victim.Ready).To(BeTrue(), "%+v", victim)
	e.g.Expect(isTrue(e.instance(nsB, "app"), "Ready")).To(BeTrue())
	e.g.Expect(e.configMap(nsB, "app")).NotTo(BeNil())
	count, sum := renderMetric(e, registry, "kustomize", "rendered")
	e.g.Expect(count).To(Equal(uint64(1)), "team-b's render alone succeeded")
	e.g.Expect(sum).To(BeNumerically("<", 5), "team-b's render did not wait for team-a's to time out")
	for _, name := range attackers {
		r := result(res, nsA, name)
		e.g.Expect(r.Action).To(BeEquivalentTo("Failed"), "%+v", r)
		e.g.Expect(r.Reason).To(Equal(render.ReasonRenderTimeout), r.Message)
		e.g.Expect(r.Message).To(And(ContainSubstring("kustomize directory tenants/a/"+name), ContainSubstring("timeout 10s")))
		e.g.Expect(r.Message).To(Or(ContainSubstring("its worker process was stopped"), ContainSubstring("while waiting for a render worker")))
		mi := e.instance(nsA, name)
		e.g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(render.ReasonRenderTimeout))
		e.g.Expect(e.configMap(nsA, name+"-a-leaf")).To(BeNil())
	}

	// team-a's fix: the nested bases give way to one ConfigMap. The next commit
	// renders everything, with the same engine and render workers.
	repo.commit("team-a: no more nested bases", map[string]string{
		"tenants/a/nested/0/kustomization.yaml": "resources: [cm.yaml]\n",
		"tenants/a/nested/0/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fixed}\ndata: {x: \"1\"}\n",
	})
	start = time.Now()
	res = e.sync(repo)
	e.g.Expect(time.Since(start)).To(BeNumerically("<", 30*time.Second))
	e.g.Expect(res.Failed()).To(BeFalse(), "%+v", res)
	for _, name := range attackers {
		e.g.Expect(result(res, nsA, name).Ready).To(BeTrue(), "%+v", result(res, nsA, name))
		e.g.Expect(isTrue(e.instance(nsA, name), "Ready")).To(BeTrue())
		e.g.Expect(e.configMap(nsA, name+"-fixed")).NotTo(BeNil())
	}
	e.g.Expect(result(res, nsB, "app").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(isTrue(e.instance(nsB, "app"), "Ready")).To(BeTrue())
}

// renderMetric returns the count and sum (seconds) of cairn_render_duration_seconds
// for one type and result.
func renderMetric(e *env, registry *prometheus.Registry, typ, result string) (uint64, float64) {
	e.t.Helper()
	families, err := registry.Gather()
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "cairn_render_duration_seconds" {
			continue
		}
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] == typ && labels["result"] == result {
				return metric.GetHistogram().GetSampleCount(), metric.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

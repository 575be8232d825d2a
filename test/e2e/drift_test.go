package e2e

import (
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestDriftCheck changes objects behind cairn's back: the sync path (hash-skip) does
// not look, the drift check finds them; Correct re-applies, Warn reports.
func TestDriftCheck(t *testing.T) {
	e := newEnv(t)
	fix := inst{name: "fix", ns: e.ns, replicas: 1, configs: configs("x")}
	warn := inst{name: "warn", ns: e.ns, replicas: 1, extra: "  drift: Warn\n"}
	repo := newGitRepo(t, appRepo("", fix, warn))
	e.g.Expect(e.sync(repo).Failed()).To(BeFalse())

	e.scale("fix", 5)
	e.scale("warn", 4)
	e.g.Expect(e.c.Delete(e.ctx, e.configMap(e.ns, "fix-x"))).To(Succeed())
	e.g.Expect(result(e.sync(repo), e.ns, "fix").Action).To(BeEquivalentTo("Unchanged"))

	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]int{}
	for i, r := range reports {
		if r.Namespace == e.ns {
			byName[r.Name] = i
			e.g.Expect(r.Err).NotTo(HaveOccurred())
		}
	}
	fixRep, warnRep := reports[byName["fix"]], reports[byName["warn"]]
	e.g.Expect(fixRep.Drifted).To(ConsistOf("Deployment/"+e.ns+"/fix", "ConfigMap/"+e.ns+"/fix-x"))
	e.g.Expect(fixRep.Corrected).To(Equal(2))
	e.g.Expect(e.replicas("fix")).To(Equal(int32(1)))
	e.g.Expect(e.configMap(e.ns, "fix-x")).NotTo(BeNil())

	e.g.Expect(warnRep.Drifted).To(ConsistOf("Deployment/" + e.ns + "/warn"))
	e.g.Expect(warnRep.Corrected).To(Equal(0))
	e.g.Expect(e.replicas("warn")).To(Equal(int32(4)))
	mi := e.instance(e.ns, "warn")
	e.g.Expect(conditions.IsTrue(mi, cairnv1.DriftedCondition)).To(BeTrue())
	e.g.Expect(conditions.GetMessage(mi, cairnv1.DriftedCondition)).To(ContainSubstring("Deployment/" + e.ns + "/warn"))
}

func (e *env) scale(name string, replicas int32) {
	e.t.Helper()
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &d)).To(Succeed())
	d.Spec.Replicas = &replicas
	e.g.Expect(e.c.Update(e.ctx, &d, client.FieldOwner("someone-else"))).To(Succeed())
}

func (e *env) replicas(name string) int32 {
	e.t.Helper()
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &d)).To(Succeed())
	return *d.Spec.Replicas
}

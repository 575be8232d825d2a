package e2e

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// TestRegistryKeyChangeReverifiesItsChartInstances: a chart instance is Ready under
// Enforce; a commit that changes only the Registry's publicKeys to another key
// re-verifies it at that sync: SignatureInvalid, nothing deleted. An instance that
// uses no Registry is not re-rendered.
func TestRegistryKeyChangeReverifiesItsChartInstances(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, false)
	rc := registryClient(t, reg, false)
	trusted, other := newKeyPair(t), newKeyPair(t)
	e.putCairnSecret("pub-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": trusted.public})
	e.putCairnSecret("other-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": other.public})
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", "hi"), trusted.key)

	registry := func(secret string) string {
		return registryYAML("charts", reg.Host, true, "  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: "+secret+"}}]\n")
	}
	files := appRepo("", inst{name: "bystander", ns: e.ns, replicas: 0})
	files["platform.yaml"] = platformWithVerify("Enforce", "")
	files["registries.yaml"] = registry("pub-" + e.ns)
	files["instances/hello.yaml"] = chartInstanceYAML("hello", e.ns, "oci://"+reg.Host+"/charts/hello", "0.1.0", "")
	repo := newGitRepo(t, files)
	e.syncClean(repo)
	e.g.Expect(isTrue(e.instanceCR(e.ns, "hello"), cairnv1.VerifiedCondition)).To(BeTrue())
	good := e.instanceCR(e.ns, "hello").Status.LastAppliedRevision

	repo.commit("trust another key", map[string]string{"registries.yaml": registry("other-" + e.ns)})
	res := e.sync(repo)
	got := result(res, e.ns, "hello")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%+v", got)
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonSignatureInvalid), got.Message)
	e.g.Expect(got.Retry).To(Equal(outcome.Stalled))
	e.g.Expect(result(res, e.ns, "bystander").Action).To(BeEquivalentTo("Unchanged"), "an instance using no Registry is not re-rendered")
	mi := e.instanceCR(e.ns, "hello")
	e.g.Expect(isTrue(mi, cairnv1.VerifiedCondition)).To(BeFalse())
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good), "the last good state stays")
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting")).NotTo(BeNil(), "nothing is deleted")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "hello")).NotTo(BeNil())
	e.g.Expect(mi.Status.Inventory.Count).To(BeNumerically(">=", 2))
}

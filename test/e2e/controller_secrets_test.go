package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

// rotateCairnSecret updates the data of a Secret in cairn's namespace in place, as a
// rotation (kubectl apply, an external secrets operator) does.
func (e *env) rotateCairnSecret(name string, data map[string][]byte) {
	e.t.Helper()
	s := &corev1.Secret{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: name}, s)).To(Succeed())
	s.Data = data
	e.g.Expect(e.c.Update(e.ctx, s)).To(Succeed())
}

// TestARotatedRegistryKeyIsPickedUpWithoutACommit: under a controller that polls
// every 10 minutes, a chart instance verified under Enforce is Ready. The cosign key
// Secret its Registry names is rotated in the cluster to a key that did not sign the
// chart: within seconds, and without a commit, the instance is verified again and
// fails closed (Verified and Ready False, SignatureInvalid, Stalled) while its objects,
// inventory and last applied revision stay. Rotated back, it is Verified and Ready
// again. An instance that uses no Registry is not rendered again. The controller runs
// with the installed ServiceAccount's token: its RBAC is enough for these watches.
// With one shard the refresh reaches the replica's reconcile through the CR: the
// revision step writes it into the instance's input (cairn.dev/input-refresh).
func TestARotatedRegistryKeyIsPickedUpWithoutACommit(t *testing.T) {
	t.Run("in the leader's sync", func(t *testing.T) { rotatedRegistryKey(t, "--shards", "0") })
	t.Run("one shard", func(t *testing.T) { rotatedRegistryKey(t, "--shards", "1") })
}

func rotatedRegistryKey(t *testing.T, mode ...string) {
	e := newEnv(t)
	bin := buildCairn(t)
	reg := startRegistry(t, false, false)
	rc := registryClient(t, reg, false)
	trusted, other := newKeyPair(t), newKeyPair(t)
	pub := "pub-" + e.ns
	e.putCairnSecret(pub, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": trusted.public})
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", "hi"), trusted.key)
	e.grantNamespace(e.ns, "*")
	deployer := "  serviceAccountName: deployer\n"
	files := appRepo("", inst{name: "bystander", ns: e.ns, configs: configs("x"), extra: deployer})
	files["platform.yaml"] = platformWithVerify("Enforce", "")
	files["registries.yaml"] = registryYAML("charts", reg.Host, true, "  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: "+pub+"}}]\n")
	files["instances/hello.yaml"] = chartInstanceYAML("hello", e.ns, "oci://"+reg.Host+"/charts/hello", "0.1.0", deployer)
	repo := newGitRepo(t, files)

	e.installController(bin, repo)
	kubeconfig, _ := e.controllerIdentity() // the installed RBAC is enough to watch them
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, e.slowControllerAs(t, repo, kubeconfig, mode...)...)
	hello := func() *cairnv1.ModuleInstance {
		mi := &cairnv1.ModuleInstance{}
		if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "hello"}, mi); err != nil {
			return mi
		}
		return mi
	}
	verified := func() string {
		c := conditions.Get(hello(), cairnv1.VerifiedCondition)
		if c == nil {
			return ""
		}
		return string(c.Status) + "/" + c.Reason
	}
	e.g.Eventually(func() bool { return conditions.IsTrue(hello(), "Ready") }, time.Minute, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	e.g.Expect(verified()).To(HavePrefix("True/"))
	e.settled(ctrl)
	good := hello().Status.LastAppliedRevision

	e.rotateCairnSecret(pub, map[string][]byte{"cosign.pub": other.public})
	rotated := time.Now()
	e.g.Eventually(verified, 15*time.Second, 100*time.Millisecond).Should(Equal("False/"+cairnv1.ReasonSignatureInvalid), ctrl.String)
	t.Logf("a rotated cosign key was applied to the instance's verification %s later, without a commit", time.Since(rotated).Round(10*time.Millisecond))
	mi := hello()
	e.g.Expect(conditions.IsFalse(mi, "Ready")).To(BeTrue())
	e.g.Expect(conditions.IsTrue(mi, "Stalled")).To(BeTrue(), "no hot retry of a bad signature")
	e.g.Expect(mi.Status.LastAppliedRevision).To(Equal(good), "the last good state stays")
	e.g.Expect(mi.Status.Inventory.Count).To(BeNumerically(">=", 2))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "hello-greeting")).NotTo(BeNil(), "nothing is deleted")
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "hello")).NotTo(BeNil())
	e.g.Expect(ctrl.out.String()).To(ContainSubstring("a Secret that Registries name changed"))
	e.g.Expect(ctrl.out.String()).NotTo(ContainSubstring(string(other.public)), "no key material in the logs")

	e.rotateCairnSecret(pub, map[string][]byte{"cosign.pub": trusted.public})
	rotated = time.Now()
	e.g.Eventually(func() bool { return conditions.IsTrue(hello(), "Ready") }, 15*time.Second, 100*time.Millisecond).Should(BeTrue(), ctrl.String)
	t.Logf("the key rotated back: Ready again %s later", time.Since(rotated).Round(10*time.Millisecond))
	e.g.Expect(verified()).To(HavePrefix("True/"))
	e.g.Expect(strings.Count(ctrl.out.String(), "step=\"render "+e.ns+"/bystander")).To(Equal(1), "rendered once, when it was new")
}

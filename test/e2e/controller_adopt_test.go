package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
)

// TestAHandDeletedCRLosesNothingUnderTheControllersRBAC: the installed controller,
// whose RBAC cannot list objects cluster-wide, follows a branch polled every 10
// minutes. A commit drops a ConfigMap from the render; before any poll, the CR is
// deleted by hand. The deletion keeps the CR's inventory and kicks a sync, which
// re-creates the CR, takes the objects back (the same UID) and prunes the one that
// left the render meanwhile; the kept inventory is then removed. So too with one
// shard, where a replica reconciles the re-created CR from its own state of the
// revision: it plans a CR no reconcile has attempted as a new instance, as the
// revision step did, and so finds the kept inventory.
func TestAHandDeletedCRLosesNothingUnderTheControllersRBAC(t *testing.T) {
	t.Run("the leader reconciles", func(t *testing.T) { handDeletedCRLosesNothing(t, "--shards", "0") })
	t.Run("one shard", func(t *testing.T) { handDeletedCRLosesNothing(t, "--shards", "1") })
}

func handDeletedCRLosesNothing(t *testing.T, extra ...string) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.grantNamespace(e.ns, "*")
	a := inst{name: "a", ns: e.ns, configs: configs("x", "y"), extra: "  serviceAccountName: deployer\n"}
	repo := newGitRepo(t, appRepo("", a))
	e.installController(bin, repo)
	kubeconfig, _ := e.controllerIdentity()
	ctrl := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, e.slowControllerAs(t, repo, kubeconfig, extra...)...)
	e.g.Eventually(func() bool { return e.configMap(e.ns, "a-y") != nil }, time.Minute, 200*time.Millisecond).Should(BeTrue(), ctrl.String)
	e.settled(ctrl)
	x := e.configMap(e.ns, "a-x")

	a.configs = configs("x")
	sha := repo.commit("drop y", map[string]string{"instances/a.yaml": a.yaml()})
	mi := e.instance(e.ns, "a")
	e.g.Expect(e.c.Delete(e.ctx, mi)).To(Succeed())
	e.g.Eventually(func() string {
		mi := e.instance(e.ns, "a")
		if mi == nil {
			return ""
		}
		return mi.Status.LastAppliedRevision
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(sha), ctrl.String)
	e.g.Expect(e.configMap(e.ns, "a-y")).To(BeNil(), "the object that left the render while the CR was gone is pruned, not orphaned")
	e.g.Expect(e.configMap(e.ns, "a-x").UID).To(Equal(x.UID), "the object still rendered is taken back, not re-created")
	e.g.Expect(e.instance(e.ns, "a").UID).NotTo(Equal(mi.UID), "a new CR")
	var kept corev1.Secret
	err := e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: "cairn-inventory-" + e.ns + ".a"}, &kept)
	e.g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the kept inventory is removed once the new CR holds it: %v", err)
}

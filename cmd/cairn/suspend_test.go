package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestSuspendIsAnEmergencyStopThatGitDoesNotUndo: after `cairn suspend`, a commit that
// changes the instance and one that removes it change nothing of its objects; the
// CR says so and `cairn status` shows it SUSPENDED; `cairn resume` lets the next sync
// apply what Git says.
func TestSuspendIsAnEmergencyStopThatGitDoesNotUndo(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", "{replicas: 1}")}))
	r := cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	replicas := func() string {
		cm := &corev1.ConfigMap{}
		if err := cc.c.Get(context.Background(), client.ObjectKey{Namespace: cc.ns, Name: "web-config"}, cm); err != nil {
			return "gone"
		}
		return cm.Data["replicas"]
	}
	g.Expect(replicas()).To(Equal("1"))

	r = execCairn(t, "suspend", cc.ns+"/web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(ContainSubstring("suspended"))
	write := func(doc string) {
		g.Expect(os.WriteFile(filepath.Join(dir, "instances/web.yaml"), []byte(doc), 0o644)).To(Succeed())
	}
	write(cliInstance(cc.ns, "web", "app", "{replicas: 2}"))
	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(cc.ns + `/web\s+Skipped`))
	g.Expect(replicas()).To(Equal("1"), "a suspended instance is not applied")
	mi := &cairnv1.ModuleInstance{}
	g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Namespace: cc.ns, Name: "web"}, mi)).To(Succeed())
	g.Expect(conditions.GetReason(mi, "Ready")).To(Equal(cairnv1.ReasonSuspended))
	g.Expect(conditions.GetMessage(mi, "Ready")).To(ContainSubstring("cairn resume"))
	r = execCairn(t, "status", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.stdout).To(MatchRegexp(`web\s.*SUSPENDED`))

	g.Expect(os.Remove(filepath.Join(dir, "instances/web.yaml"))).To(Succeed())
	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(replicas()).To(Equal("1"), "nor removed")
	write(cliInstance(cc.ns, "web", "app", "{replicas: 2}"))

	r = execCairn(t, "resume", cc.ns+"/web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(replicas()).To(Equal("2"), "resumed: applied")
	g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Namespace: cc.ns, Name: "web"}, mi)).To(Succeed())
	g.Expect(conditions.IsTrue(mi, "Ready")).To(BeTrue())

	r = execCairn(t, "suspend", cc.ns+"/nope", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).To(MatchError(ContainSubstring("no ModuleInstance " + cc.ns + "/nope")))
	r = execCairn(t, "suspend", "web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).To(MatchError(ContainSubstring("NAMESPACE/NAME")))
}

// TestReconcileReappliesEveryObjectOnce: `cairn reconcile` makes the next sync apply
// every object again (so a hand edit of an object is put back even when nothing changed
// in Git), once: the sync after it leaves the instance alone.
func TestReconcileReappliesEveryObjectOnce(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", "{replicas: 1}")}))
	r := cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)

	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: cc.ns, Name: "web-config"}
	g.Expect(cc.c.Get(ctx, key, cm)).To(Succeed())
	cm.Data["replicas"] = "99"
	g.Expect(cc.c.Update(ctx, cm)).To(Succeed())

	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.stdout).To(MatchRegexp(cc.ns+`/web\s+Unchanged`), "nothing changed in Git: not touched")

	r = execCairn(t, "reconcile", cc.ns+"/web", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(ContainSubstring("reconcile requested"))
	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(cc.ns+`/web\s+Updated\s+2 objects applied \(2 changed`), "every object applied again")
	g.Expect(cc.c.Get(ctx, key, cm)).To(Succeed())
	g.Expect(cm.Data["replicas"]).To(Equal("1"), "the hand edit is put back")
	mi := &cairnv1.ModuleInstance{}
	g.Expect(cc.c.Get(ctx, client.ObjectKey{Namespace: cc.ns, Name: "web"}, mi)).To(Succeed())
	g.Expect(mi.Status.LastHandledReconcileAt).To(Equal(mi.Annotations[cairnv1.ReconcileRequestAnnotation]))

	r = cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.stdout).To(MatchRegexp(cc.ns+`/web\s+Unchanged`), "handled once")
}

// TestReconcileSourceIsShownAndRecorded: `cairn reconcile source` annotates the
// Platform; cairn status shows the request pending until a sync handles it, then
// handled, and the Platform's status.lastHandledReconcileAt holds the value.
func TestReconcileSourceIsShownAndRecorded(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	r := execCairn(t, "reconcile", "source", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).To(MatchError("no Platform cluster in the cluster (it is created by the first sync)"))

	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", "{replicas: 1}")}))
	r = cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	r = execCairn(t, "reconcile", "source", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	g.Expect(r.stdout).To(MatchRegexp(`^source: reconcile requested at \S+ \(the controller syncs the branch head at once\)`))
	r = execCairn(t, "status", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.stdout).To(MatchRegexp(`(?m)^source: \(a local directory\) at dir:\w+; reconcile requested at \S+: pending$`))

	r = cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	p := &cairnv1.Platform{}
	g.Expect(cc.c.Get(context.Background(), client.ObjectKey{Name: cairnv1.PlatformName}, p)).To(Succeed())
	g.Expect(p.Status.LastHandledReconcileAt).NotTo(BeEmpty())
	g.Expect(p.Status.LastHandledReconcileAt).To(Equal(p.Annotations[cairnv1.ReconcileRequestAnnotation]))
	r = execCairn(t, "status", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.stdout).To(MatchRegexp(`(?m)^source: .*: handled$`))
	g.Expect(r.stdout).To(MatchRegexp(`(?m)^NAMESPACE `), "the instances' table follows")
}

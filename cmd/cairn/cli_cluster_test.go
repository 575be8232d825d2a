package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/test/harness"
)

// cliCluster is a command test's view of the shared cluster: its kubeconfig, a client
// and a namespace of its own. The Platform is a singleton, so each test starts with no
// cairn CRs.
type cliCluster struct {
	kubeconfig string
	c          client.Client
	ns         string
}

func newCLICluster(t *testing.T) *cliCluster {
	t.Helper()
	g := NewWithT(t)
	hc := harness.ForTest(t)
	c, err := client.New(hc.RESTConfig, client.Options{Scheme: reconciler.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	cc := &cliCluster{kubeconfig: hc.Kubeconfig, c: c, ns: fmt.Sprintf("cli-%x", rand.Uint32())}
	r := execCairn(t, "install", "--kubeconfig", cc.kubeconfig)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stderr)
	var ns corev1.Namespace
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: reconciler.DefaultNamespace}, &ns)).To(Succeed(),
		"install creates cairn's namespace, where Registry Secrets live")
	cc.reset(g)
	return cc
}

func (cc *cliCluster) reset(g *WithT) {
	ctx := context.Background()
	var mis cairnv1.ModuleInstanceList
	g.Expect(cc.c.List(ctx, &mis)).To(Succeed())
	for i := range mis.Items {
		g.Expect(client.IgnoreNotFound(cc.c.Delete(ctx, &mis.Items[i]))).To(Succeed())
	}
	p := &cairnv1.Platform{}
	p.Name = cairnv1.PlatformName
	g.Expect(client.IgnoreNotFound(cc.c.Delete(ctx, p))).To(Succeed())
}

// run runs a cluster command against the test's cluster, with a cache of its own.
func (cc *cliCluster) run(t *testing.T, args ...string) cliResult {
	t.Helper()
	return execCairn(t, append(args, "--kubeconfig", cc.kubeconfig, "--cache-dir", t.TempDir())...)
}

func (cc *cliCluster) instances(g *WithT) []cairnv1.ModuleInstance {
	var mis cairnv1.ModuleInstanceList
	g.Expect(cc.c.List(context.Background(), &mis, client.InNamespace(cc.ns))).To(Succeed())
	return mis.Items
}

func TestPlanShowsCreatesAndChangesNothing(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", "{}")}))

	r := cc.run(t, "plan", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(r.stdout).To(ContainSubstring(cc.ns + "/web: Create (new instance)"))
	g.Expect(r.stdout).To(ContainSubstring("+ create ConfigMap/" + cc.ns + "/web-config"))
	g.Expect(r.stdout).To(ContainSubstring("+ create Deployment/" + cc.ns + "/web"))

	g.Expect(cc.instances(g)).To(BeEmpty(), "plan creates no ModuleInstance")
	p := &cairnv1.Platform{}
	err := cc.c.Get(context.Background(), client.ObjectKey{Name: cairnv1.PlatformName}, p)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "plan creates no Platform: %v", err)
	err = cc.c.Get(context.Background(), client.ObjectKey{Name: cc.ns}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "plan creates no namespace: %v", err)
}

// webAndBrokenRepo is a repository directory with a good instance web and an
// instance broken whose module does not compile.
func webAndBrokenRepo(t *testing.T, ns string) string {
	return writeRepoDir(t, cliRepo(map[string]string{
		"web":    cliInstance(ns, "web", "app", "{}"),
		"broken": cliInstance(ns, "broken", "broken", "{}"),
	}))
}

func TestSyncOnceExitsTwoWhenAnInstanceFailsAndStatusListsBoth(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	dir := webAndBrokenRepo(t, cc.ns)
	r := cc.run(t, "sync", "--once", "-q", "--repo", dir)
	g.Expect(r.err).To(MatchError(errInstancesFailed), r.stdout+r.stderr)
	g.Expect(r.code).To(Equal(2))
	g.Expect(r.stdout).To(MatchRegexp(`synced revision dir:[0-9a-f]{12}\n`))
	g.Expect(r.stdout).To(MatchRegexp(cc.ns + `/broken\s+Failed\s+failed to render ` + cc.ns + `/broken: modules/broken/main.cue:5:`))
	g.Expect(r.stdout).To(MatchRegexp(cc.ns + `/web\s+Created\s+2 objects applied`))

	s := execCairn(t, "status", "-o", "json", "--kubeconfig", cc.kubeconfig)
	g.Expect(s.err).NotTo(HaveOccurred(), s.stderr)
	var rows []statusRow
	g.Expect(json.Unmarshal([]byte(s.stdout), &rows)).To(Succeed(), s.stdout)
	byName := map[string]statusRow{}
	for _, row := range rows {
		if row.Namespace == cc.ns {
			byName[row.Name] = row
		}
	}
	g.Expect(byName).To(HaveLen(2))
	g.Expect(byName["web"].Ready).To(Equal("True"))
	g.Expect(byName["web"].Reason).To(Equal(cairnv1.ReasonSucceeded))
	g.Expect(byName["web"].Objects).To(Equal(int32(2)))
	g.Expect(byName["web"].Revision).To(MatchRegexp(`^dir:[0-9a-f]{12}$`))
	g.Expect(byName["broken"].Ready).To(Equal("False"))
	g.Expect(byName["broken"].Reason).To(Equal(cairnv1.ReasonRenderFailed))
	g.Expect(byName["broken"].Message).To(ContainSubstring("modules/broken/main.cue:5:"))
	g.Expect(byName["broken"].Revision).To(BeEmpty(), "nothing of broken was ever applied")
}

func TestPlanAndSyncNeverPrintSecretData(t *testing.T) {
	g := NewWithT(t)
	cc := newCLICluster(t)
	const secret = "hunter2-cairn-plan"
	dir := writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", `{password: "`+secret+`"}`)}))

	for _, format := range []string{"text", "json", "markdown"} {
		r := cc.run(t, "plan", "--repo", dir, "-o", format)
		g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
		g.Expect(r.stdout).To(ContainSubstring("Secret/"+cc.ns+"/web-creds"), format)
		g.Expect(r.stdout+r.stderr).NotTo(ContainSubstring(secret), format)
	}
	r := cc.run(t, "sync", "--once", "--repo", dir)
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(r.stdout + r.stderr).NotTo(ContainSubstring(secret))

	// A changed secret shows as a configured object, never as its value.
	dir = writeRepoDir(t, cliRepo(map[string]string{"web": cliInstance(cc.ns, "web", "app", `{password: "`+secret+`-v2"}`)}))
	r = cc.run(t, "plan", "--repo", dir, "-o", "json")
	g.Expect(r.err).NotTo(HaveOccurred(), r.stdout+r.stderr)
	g.Expect(r.stdout).To(ContainSubstring(`"Secret/` + cc.ns + `/web-creds"`))
	g.Expect(r.stdout + r.stderr).NotTo(ContainSubstring(secret))
}

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/lease"
)

// TestConcurrentSyncsTakeTurnsOnTheLease: two `cairn sync --once` started at the same
// moment: one takes the Lease and syncs, the other waits until it is released and
// then finds nothing to do; the cluster holds exactly what one sync makes.
func TestConcurrentSyncsTakeTurnsOnTheLease(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	keys := pruneKeys(40, 1)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns, configs: configs(keys...)}))
	bin := buildCairn(t)
	syncs := []cairnSync{
		{bin: bin, repoURL: repo.url(), kubeconfig: e.cluster.Kubeconfig, cacheDir: t.TempDir()},
		{bin: bin, repoURL: repo.url(), kubeconfig: e.cluster.Kubeconfig, cacheDir: t.TempDir()},
	}
	outs, errs := make([]string, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i := range syncs {
		wg.Go(func() { outs[i], errs[i] = syncs[i].run(e.ctx) })
	}
	wg.Wait()
	for i := range errs {
		e.g.Expect(errs[i]).NotTo(HaveOccurred(), "sync %d:\n%s", i, outs[i])
	}

	first, second := outs[0], outs[1]
	if leaseLogTime(t, first, "holding").After(leaseLogTime(t, second, "holding")) {
		first, second = second, first
	}
	t.Logf("first:\n%s\nsecond:\n%s", indent(first), indent(second))
	// Both log on the same clock; the first logs its release right after the API
	// server took it, so a few milliseconds of slack cover that write.
	e.g.Expect(leaseLogTime(t, second, "holding")).To(BeTemporally(">=", leaseLogTime(t, first, "released").Add(-50*time.Millisecond)),
		"the second sync took the Lease only after the first released it")
	e.g.Expect(first).To(MatchRegexp(e.ns + `/a\s+Created`))
	e.g.Expect(second).NotTo(MatchRegexp(e.ns+`/a\s+(Created|Updated)`), "the second sync found the work done")

	cms := e.configMapUIDs(e.ns)
	e.g.Expect(cms).To(HaveLen(len(keys)), "a's ConfigMaps and no other")
	for _, k := range keys {
		e.g.Expect(e.configMap(e.ns, "a-"+k).Data).To(Equal(map[string]string{"value": "v-" + k}))
	}
	e.g.Expect(e.get("apps/v1", "Deployment", e.ns, "a")).NotTo(BeNil())
	mi := e.instance(e.ns, "a")
	e.g.Expect(isTrue(mi, "Ready")).To(BeTrue())
	e.g.Expect(e.inventoryEntries(e.ns, "a")).To(HaveLen(len(keys) + 1))
	e.g.Expect(e.syncLease().Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "released at exit")
}

// TestSecondSyncFailsNamingTheLeaseHolder: while one sync waits on an instance that
// never becomes healthy, a second with a short --lock-timeout fails naming the holder
// and when it last renewed; SIGTERM to the first frees the Lease at once.
func TestSecondSyncFailsNamingTheLeaseHolder(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	st := e.startStuckSync(t)
	holder := e.syncLease().Spec.HolderIdentity

	begin := time.Now()
	out, err := exec.CommandContext(e.ctx, st.bin, "sync", "--once", "--repo", st.repo.url(), "--lock-timeout", "3s",
		"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", t.TempDir()).CombinedOutput()
	took := time.Since(begin)
	t.Logf("the second sync took %s:\n%s", took.Round(time.Millisecond), indent(string(out)))
	e.g.Expect(err).To(HaveOccurred())
	e.g.Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1))
	e.g.Expect(string(out)).To(MatchRegexp(`another sync holds Lease cairn-system/cairn-sync: holder ` +
		regexp.QuoteMeta(*holder) + `, last renewed \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+s ago\); gave up after waiting 3s`))
	e.g.Expect(took).To(BeNumerically(">=", 3*time.Second))
	e.g.Expect(took).To(BeNumerically("<", 15*time.Second))
	e.g.Expect(e.configMap(e.ns, "stuck-config").Data).To(Equal(map[string]string{"value": "v1"}), "the holder's work stands")

	exit, err := st.proc.stop(10 * time.Second)
	e.g.Expect(exit).To(BeNumerically("<", 5*time.Second), "%v\n%s", err, st.proc)
	e.g.Expect(e.syncLease().Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "released at SIGTERM\n%s", st.proc)
}

// TestStaleLeaseOfADeadHolderIsTakenOver: a Lease whose holder died an hour ago holds
// a sync off only until it has gone unrenewed for its duration; then it is taken over.
// A missing cairn namespace is named.
func TestStaleLeaseOfADeadHolderIsTakenOver(t *testing.T) {
	e := newEnv(t)
	e.deleteNamespacesAtEnd(e.ns)
	repo := newGitRepo(t, appRepo("", inst{name: "a", ns: e.ns, configs: configs("x")}))
	cli := cairnSync{bin: buildCairn(t), repoURL: repo.url(), kubeconfig: e.cluster.Kubeconfig, cacheDir: t.TempDir()}
	e.putGhostLease(time.Now().Add(-time.Hour))

	out, err := cli.runWith(e.ctx, "--lock-timeout", "2s")
	e.g.Expect(err).To(HaveOccurred(), out)
	e.g.Expect(out).To(ContainSubstring("holder ghost_0, last renewed"), "the ghost counts until its Lease expires")
	e.g.Expect(e.instance(e.ns, "a")).To(BeNil(), "nothing synced")

	begin := time.Now()
	out, err = cli.run(e.ctx)
	took := time.Since(begin)
	t.Logf("took over the ghost's Lease and synced in %s:\n%s", took.Round(time.Millisecond), indent(out))
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	e.g.Expect(took).To(BeNumerically(">=", 14*time.Second), "the ghost's 15s lease duration is honoured")
	e.g.Expect(took).To(BeNumerically("<", 45*time.Second))
	e.g.Expect(isTrue(e.instance(e.ns, "a"), "Ready")).To(BeTrue())
	l := e.syncLease()
	e.g.Expect(*l.Spec.LeaseTransitions).To(BeNumerically(">", 3), "taken over from the ghost")

	out, err = cli.runWith(e.ctx, "--namespace", "cairn-nowhere")
	e.g.Expect(err).To(HaveOccurred())
	e.g.Expect(out).To(ContainSubstring("cairn's namespace cairn-nowhere does not exist: run `cairn install`"))
}

// stuckSync is a running `cairn sync --once` that holds the Lease while it waits on an
// instance whose Deployment never becomes ready (timeout 2m).
type stuckSync struct {
	bin  string
	repo *gitRepo
	sha  string // the repository's head
	proc *cairnProcess
}

// stuckModule renders a ConfigMap and a Deployment no node can run.
const stuckModule = `package stuck

instance: {name: string, namespace: string}
objects: {
	config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-config", data: value: "v1"}
	deployment: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: instance.name
		spec: {
			replicas: 1
			selector: matchLabels: app: instance.name
			template: {
				metadata: labels: app: instance.name
				spec: {
					nodeSelector: "cairn.dev/no-such-node": "true"
					containers: [{name: "app", image: "registry.invalid/app:1"}]
				}
			}
		}
	}
}
`

func (e *env) startStuckSync(t *testing.T) *stuckSync {
	t.Helper()
	files := map[string]string{
		"platform.yaml":                    platformYAML(""),
		"modules/stuck/stuck.cue":          stuckModule,
		"modules/stuck/cue.mod/module.cue": "module: \"cairn.dev/test/stuck@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"instances/stuck.yaml": fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: stuck\n"+
			"  namespace: %s\nspec:\n  module:\n    local:\n      path: ./modules/stuck\n  wait: true\n  timeout: 2m\n", e.ns),
	}
	st := &stuckSync{bin: buildCairn(t), repo: newGitRepo(t, files)}
	head, err := st.repo.r.Head()
	e.g.Expect(err).NotTo(HaveOccurred())
	st.sha = head.Hash().String()
	st.proc = startCairnProcess(t, st.bin, "sync", "--once", "--repo", st.repo.url(),
		"--kubeconfig", e.cluster.Kubeconfig, "--cache-dir", t.TempDir())
	e.g.Eventually(func() bool { return e.configMap(e.ns, "stuck-config") != nil }, 60*time.Second, 100*time.Millisecond).
		Should(BeTrue(), "the stuck sync applies\n%s", st.proc)
	e.g.Expect(e.syncLease().Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
	return st
}

// runWith runs the sync with extra flags.
func (s cairnSync) runWith(ctx context.Context, args ...string) (string, error) {
	cmd, out := s.command(ctx)
	cmd.Args = append(cmd.Args, args...)
	err := cmd.Run()
	return out.String(), err
}

// syncLease reads the Lease cairn sync holds.
func (e *env) syncLease() *coordinationv1.Lease {
	e.t.Helper()
	l := &coordinationv1.Lease{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: lease.Name}, l)).To(Succeed())
	return l
}

// putGhostLease makes the sync Lease held by "ghost_0", last renewed at renewed, as a
// holder that died leaves it.
func (e *env) putGhostLease(renewed time.Time) {
	e.t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: lease.Name}}
	_ = e.c.Delete(e.ctx, l)
	at := metav1.NewMicroTime(renewed)
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ghost_0"), LeaseDurationSeconds: ptr.To[int32](15),
		AcquireTime: &at, RenewTime: &at, LeaseTransitions: ptr.To[int32](3)}
	e.g.Expect(e.c.Create(e.ctx, l)).To(Succeed())
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), l) })
}

// leaseLogTime is the time of cairn's "<what> the sync Lease" log line in out.
func leaseLogTime(t *testing.T, out, what string) time.Time {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `msg="`+what+` the sync Lease"`) {
			continue
		}
		m := regexp.MustCompile(`time=(\S+)`).FindStringSubmatch(line)
		if len(m) != 2 {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			return at
		}
	}
	t.Fatalf("no %q line in:\n%s", what+" the sync Lease", out)
	return time.Time{}
}

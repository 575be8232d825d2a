package e2e

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/test/harness"
)

// Faults in the middle of a sync: the API server going away during an apply, and cairn
// itself killed during a prune. After the fault, the next sync converges, prunes
// nothing that stays and does not redo what was recorded as done.

const (
	// bulkGood and bulkTarget are the ConfigMaps of the last good state and of the
	// commit whose apply the API server dies in.
	bulkGood, bulkTarget = 10, 1000
	// stopAfterApplies is how many apply requests the API server sees before it dies.
	stopAfterApplies = 300
)

// syncOutcome is what a Sync run in a goroutine returned.
type syncOutcome struct {
	res  *reconciler.SyncResult
	err  error
	took time.Duration
}

func TestAPIServerStoppedMidApplyThenRestarted(t *testing.T) {
	f := newApplyFault(t)
	f.commitCount(bulkTarget)
	out, stopped := f.syncUntilAPIServerDies()
	f.expectFailedAttempt(out)

	f.g.Expect(stopped.Start(f.e.ctx)).To(Succeed())
	recorded, pending := f.expectLastGoodKept()
	f.expectResyncSendsOnlyPending(recorded, pending)
	f.expectBulkConverged()
}

// applyFault is the state of TestAPIServerStoppedMidApplyThenRestarted: its own cluster,
// the recorder on cairn's client, and the last good state of instance bulk.
type applyFault struct {
	t        *testing.T
	g        *WithT
	e        *env
	hc       *harness.Cluster
	rec      *applyRecorder
	repo     *gitRepo
	goodRev  string
	target   string            // the commit the fault hits
	lastGood map[string]string // ConfigMap UIDs by name, the bystander included
	saUID    types.UID
	created  map[string]string // ConfigMap UIDs after the fault
}

// newApplyFault syncs instance bulk with bulkGood ConfigMaps: the last good state.
func newApplyFault(t *testing.T) *applyFault {
	hc := startOwnCluster(t)
	rec := &applyRecorder{}
	cfg := rest.CopyConfig(hc.RESTConfig)
	cfg.WrapTransport = rec.wrap
	e := newEnvWithConfig(t, hc, cfg)
	rec.reset(e.ns, 0)
	files := appRepo("")
	files["modules/bulk/bulk.cue"] = bulkModule
	files["instances/bulk.yaml"] = bulkInstanceYAML("bulk", e.ns, bulkGood)
	f := &applyFault{t: t, g: e.g, e: e, hc: hc, rec: rec, repo: newGitRepo(t, files)}
	res := e.sync(f.repo)
	r := result(res, e.ns, "bulk")
	f.g.Expect(r.Ready).To(BeTrue(), r.Message)
	f.goodRev = res.Revision
	e.createConfigMap(e.ns, "bystander", nil)
	f.lastGood = e.configMapUIDs(e.ns)
	f.g.Expect(f.lastGood).To(HaveLen(bulkGood + 1))
	f.saUID = e.get("v1", "ServiceAccount", e.ns, "bulk").GetUID()
	return f
}

// commitCount commits a new count of ConfigMaps for instance bulk.
func (f *applyFault) commitCount(count int) {
	f.target = f.repo.commit(fmt.Sprintf("%d ConfigMaps", count),
		map[string]string{"instances/bulk.yaml": bulkInstanceYAML("bulk", f.e.ns, count)})
}

// syncUntilAPIServerDies syncs the branch head in a goroutine and kills the API server
// once stopAfterApplies ConfigMap applies have been sent, holding every later request
// until it is dead. It returns what Sync returned, within a bound.
func (f *applyFault) syncUntilAPIServerDies() (syncOutcome, *harness.StoppedAPIServer) {
	rev, err := f.e.revision(f.repo)
	f.g.Expect(err).NotTo(HaveOccurred())
	reached := f.rec.reset(f.e.ns, stopAfterApplies)
	done := make(chan syncOutcome, 1)
	begin := time.Now()
	go func() {
		res, err := f.e.engine.Sync(f.e.ctx, rev)
		done <- syncOutcome{res: res, err: err, took: time.Since(begin)}
	}()
	select {
	case <-reached:
	case out := <-done:
		f.t.Fatalf("the sync ended before %d applies were sent: %v %+v", stopAfterApplies, out.err, out.res)
	case <-time.After(time.Minute):
		f.t.Fatalf("no %d apply requests within a minute", stopAfterApplies)
	}
	stopped, err := f.hc.StopAPIServer(0)
	f.g.Expect(err).NotTo(HaveOccurred())
	stoppedAt := time.Since(begin)
	f.rec.releaseHeld()
	var out syncOutcome
	select {
	case out = <-done:
	case <-time.After(time.Minute):
		f.t.Fatal("Sync did not return within a minute of the API server stopping")
	}
	sent, held := f.rec.applied()
	f.t.Logf("API server killed %s into the sync, after %d ConfigMap applies were sent; %d requests were held "+
		"and sent to the dead server; Sync returned %s after the kill", stoppedAt.Round(time.Millisecond),
		len(sent), held, (out.took - stoppedAt).Round(time.Millisecond))
	f.g.Expect(out.took - stoppedAt).To(BeNumerically("<", 30*time.Second))
	return out, stopped
}

// expectFailedAttempt checks the result of the interrupted sync: bulk failed applying,
// naming its objects and the refused connection, and pruned nothing.
func (f *applyFault) expectFailedAttempt(out syncOutcome) {
	f.g.Expect(out.res).NotTo(BeNil(), "Sync error: %v", out.err)
	r := result(out.res, f.e.ns, "bulk")
	f.t.Logf("first attempt: %s %s, %d applied, %d pruned; Sync error: %v", r.Action, r.Reason,
		r.Applied, r.Pruned, out.err)
	f.g.Expect(r.Action).To(BeEquivalentTo("Failed"))
	f.g.Expect(r.Reason).To(Equal(cairnv1.ReasonApplyFailed))
	f.g.Expect(r.Pruned).To(BeZero())
	f.g.Expect(r.Message).To(And(ContainSubstring("ConfigMap/"+f.e.ns+"/bulk-"), ContainSubstring("connection refused")))
}

// expectLastGoodKept checks, once the API server is back, that no object of the last
// good state was deleted or recreated and that the instance still records it. It
// returns the names the inventory records as applied and the count of pending entries.
func (f *applyFault) expectLastGoodKept() (recorded map[string]bool, pending int) {
	e := f.e
	f.created = e.configMapUIDs(e.ns)
	for name, uid := range f.lastGood {
		f.g.Expect(f.created).To(HaveKeyWithValue(name, uid), "ConfigMap %s of the last good state", name)
	}
	f.g.Expect(e.get("v1", "ServiceAccount", e.ns, "bulk").GetUID()).To(Equal(f.saUID))
	recorded = map[string]bool{}
	for _, en := range e.inventoryEntries(e.ns, "bulk") {
		if en.Hash != "" {
			recorded[inventoryName(en.ID)] = true
		} else {
			pending++
		}
	}
	mi := e.instance(e.ns, "bulk")
	f.t.Logf("after the restart: %d of %d new ConfigMaps exist; the inventory has %d entries, %d recorded as applied, "+
		"%d pending; Ready %v at %s", len(f.created)-len(f.lastGood), bulkTarget-bulkGood, len(recorded)+pending,
		len(recorded), pending, isTrue(mi, "Ready"), shortRev(mi.Status.LastAppliedRevision))
	f.g.Expect(mi.Status.LastAppliedRevision).To(Equal(f.goodRev), "the last good state stays recorded")
	return recorded, pending
}

// expectResyncSendsOnlyPending syncs again and checks that no object recorded as
// applied was sent, and none twice.
func (f *applyFault) expectResyncSendsOnlyPending(recorded map[string]bool, pending int) {
	f.rec.reset(f.e.ns, 0)
	res := f.e.sync(f.repo)
	r := result(res, f.e.ns, "bulk")
	f.g.Expect(r.Ready).To(BeTrue(), r.Message)
	f.g.Expect(r.Pruned).To(BeZero())
	resent, _ := f.rec.applied()
	again := 0
	for _, name := range resent {
		f.g.Expect(recorded).NotTo(HaveKey(name), "%s was recorded as applied and sent again", name)
		if _, ok := f.created[name]; ok {
			again++
		}
	}
	f.g.Expect(resent).To(HaveLen(len(uniq(resent))), "an object was sent twice in one sync")
	f.g.Expect(len(resent)).To(BeNumerically("<=", pending))
	f.t.Logf("second sync: %d ConfigMap applies (%d for ConfigMaps the first attempt had created, %d new); %s",
		len(resent), again, len(resent)-again, r.Message)
}

// expectBulkConverged checks the end state of instance bulk: every ConfigMap with its
// data, the last good objects never recreated, the inventory complete and applied.
func (f *applyFault) expectBulkConverged() {
	e, g := f.e, f.g
	var list corev1.ConfigMapList
	g.Expect(e.c.List(e.ctx, &list, client.InNamespace(e.ns),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "bulk")})).To(Succeed())
	data := map[string]string{}
	for _, cm := range list.Items {
		data[cm.Name] = cm.Data["value"]
	}
	g.Expect(data).To(HaveLen(bulkTarget))
	for i := range bulkTarget {
		g.Expect(data).To(HaveKeyWithValue(fmt.Sprintf("bulk-%d", i), fmt.Sprintf("value-%d", i)))
	}
	live := e.configMapUIDs(e.ns)
	for name, uid := range f.lastGood {
		g.Expect(live).To(HaveKeyWithValue(name, uid), "ConfigMap %s of the last good state", name)
	}
	g.Expect(e.get("v1", "ServiceAccount", e.ns, "bulk").GetUID()).To(Equal(f.saUID))
	mi := e.instance(e.ns, "bulk")
	g.Expect(isTrue(mi, "Ready")).To(BeTrue())
	g.Expect(mi.Status.LastAppliedRevision).To(Equal(f.target))
	entries := e.inventoryEntries(e.ns, "bulk")
	g.Expect(entries).To(HaveLen(bulkTarget + 1))
	for _, en := range entries {
		g.Expect(en.Hash).NotTo(BeEmpty(), "inventory entry %s has no hash", en.ID)
	}
}

// inventoryName is the name part of an inventory id <namespace>_<name>_<group>_<kind>.
func inventoryName(id string) string {
	parts := strings.Split(id, "_")
	if len(parts) < 4 {
		return id
	}
	return strings.Join(parts[1:len(parts)-2], "_")
}

func uniq(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

const (
	// pruneBefore and pruneAfter are the ConfigMaps of instance a before and after the
	// commit whose prune cairn is killed in; every fourth one stays.
	pruneBefore, pruneAfter = 400, 100
	// killAtRemaining is the count of a's ConfigMaps at which cairn is killed: half of
	// the deletions done.
	killAtRemaining = pruneBefore - (pruneBefore-pruneAfter)/2
)

func pruneKeys(n, step int) []string {
	var keys []string
	for i := 0; i < n; i += step {
		keys = append(keys, fmt.Sprintf("k%03d", i))
	}
	return keys
}

func TestCairnKilledMidPruneFinishesOnRestart(t *testing.T) {
	f := newPruneFault(t)
	f.a.configs = configs(pruneKeys(pruneBefore, pruneBefore/pruneAfter)...)
	sha := f.repo.commit("drop three ConfigMaps of four", map[string]string{"instances/a.yaml": f.a.yaml()})
	left := f.e.killCairnMidPrune(f.cli)
	mi := f.e.instance(f.e.ns, "a")
	t.Logf("after the kill: Ready %v at %s, inventory %d entries", isTrue(mi, "Ready"),
		shortRev(mi.Status.LastAppliedRevision), mi.Status.Inventory.Count)
	f.g.Expect(left).To(BeNumerically(">", pruneAfter), "cairn was killed after the prune had finished")

	begin := time.Now()
	out, err := f.cli.run(f.e.ctx)
	f.g.Expect(err).NotTo(HaveOccurred(), out)
	t.Logf("the restarted sync took %s:\n%s", time.Since(begin).Round(time.Millisecond), indent(out))
	f.expectPruneFinished(sha)
}

// pruneFault is the state of TestCairnKilledMidPruneFinishesOnRestart: instances a (with
// pruneBefore ConfigMaps) and b in the test's namespace, c in another, synced by the
// cairn binary, and the objects that must outlive the prune.
type pruneFault struct {
	g       *WithT
	e       *env
	cli     cairnSync
	repo    *gitRepo
	a       inst
	others  []inst
	before  map[string]map[string]string // ConfigMap UIDs by namespace and name
	deploys map[string]types.UID         // Deployment UIDs by instance
}

func newPruneFault(t *testing.T) *pruneFault {
	e := newEnv(t)
	other := e.ns + "-other"
	e.deleteNamespacesAtEnd(e.ns, other)
	f := &pruneFault{g: e.g, e: e,
		a: inst{name: "a", ns: e.ns, replicas: 0, configs: configs(pruneKeys(pruneBefore, 1)...)},
		others: []inst{{name: "b", ns: e.ns, replicas: 0, configs: configs("x", "y")},
			{name: "c", ns: other, replicas: 0, configs: configs("x", "y")}}}
	f.repo = newGitRepo(t, appRepo("", f.a, f.others[0], f.others[1]))
	f.cli = cairnSync{bin: buildCairn(t), repoURL: f.repo.url(), kubeconfig: e.cluster.Kubeconfig, cacheDir: t.TempDir()}
	out, err := f.cli.run(e.ctx)
	f.g.Expect(err).NotTo(HaveOccurred(), out)

	// Beside the other instances': one nobody manages in each namespace, and one that
	// carries a's labels but is in no inventory.
	e.createConfigMap(e.ns, "bystander", nil)
	e.createConfigMap(other, "bystander", nil)
	e.createConfigMap(e.ns, "a-foreign", map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue,
		cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "a")})
	f.before = map[string]map[string]string{e.ns: e.configMapUIDs(e.ns), other: e.configMapUIDs(other)}
	f.g.Expect(len(f.before[e.ns])).To(Equal(pruneBefore+2+2), "ConfigMaps in %s", e.ns)
	f.deploys = map[string]types.UID{}
	for _, i := range append([]inst{f.a}, f.others...) {
		f.deploys[i.name] = e.get("apps/v1", "Deployment", i.ns, i.name).GetUID()
	}
	return f
}

// expectPruneFinished checks that exactly a's stale ConfigMaps are gone, every other
// object is the one that was there before, and a records revision sha with its new
// inventory.
func (f *pruneFault) expectPruneFinished(sha string) {
	e, g := f.e, f.g
	keep := map[string]bool{}
	for k := range f.a.configs {
		keep["a-"+k] = true
	}
	for ns, uids := range f.before {
		after := e.configMapUIDs(ns)
		for name, uid := range uids {
			if ns == e.ns && strings.HasPrefix(name, "a-k") && !keep[name] {
				g.Expect(after).NotTo(HaveKey(name), "%s/%s should be pruned", ns, name)
				continue
			}
			g.Expect(after).To(HaveKeyWithValue(name, uid), "%s/%s should stay untouched", ns, name)
		}
		if ns == e.ns {
			g.Expect(len(after)).To(Equal(pruneAfter+2+2), "ConfigMaps left in %s", ns)
		} else {
			g.Expect(len(after)).To(Equal(2+1), "ConfigMaps left in %s", ns)
		}
	}
	for _, i := range append([]inst{f.a}, f.others...) {
		g.Expect(e.get("apps/v1", "Deployment", i.ns, i.name).GetUID()).To(Equal(f.deploys[i.name]), "Deployment %s", i.name)
		g.Expect(isTrue(e.instance(i.ns, i.name), "Ready")).To(BeTrue(), "instance %s", i.name)
	}
	g.Expect(e.instance(e.ns, "a").Status.LastAppliedRevision).To(Equal(sha))
	var names []string
	for _, en := range e.inventoryEntries(e.ns, "a") {
		names = append(names, inventoryName(en.ID))
	}
	want := []string{"a"}
	for name := range keep {
		want = append(want, name)
	}
	g.Expect(names).To(ConsistOf(want), "inventory of a")
}

// killCairnMidPrune runs `cairn sync --once` and kills it (SIGKILL) once half of a's
// stale ConfigMaps are deleted. It returns how many of a's ConfigMaps remain.
func (e *env) killCairnMidPrune(cli cairnSync) int {
	e.t.Helper()
	cmd, out := cli.command(e.ctx)
	begin := time.Now()
	e.g.Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var firstDrop time.Duration
	for {
		n, err := countConfigMaps(e.ctx, e.c, e.ns, "a-k")
		e.g.Expect(err).NotTo(HaveOccurred())
		if n < pruneBefore && firstDrop == 0 {
			firstDrop = time.Since(begin)
		}
		if n <= killAtRemaining {
			e.g.Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
			<-exited
			left, err := countConfigMaps(e.ctx, e.c, e.ns, "a-k")
			e.g.Expect(err).NotTo(HaveOccurred())
			e.t.Logf("deletions began %s after start; cairn killed at %s with %d of a's ConfigMaps left "+
				"(%d once it had exited); output so far:\n%s", firstDrop.Round(time.Millisecond),
				time.Since(begin).Round(time.Millisecond), n, left, indent(out.String()))
			return left
		}
		select {
		case err := <-exited:
			e.t.Fatalf("cairn exited (%v) before it could be killed mid-prune, %d ConfigMaps left:\n%s", err, n, out)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Since(begin) > 2*time.Minute {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			e.t.Fatalf("no prune within two minutes:\n%s", out)
		}
	}
}

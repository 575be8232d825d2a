package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/shard"
)

// shardHolder is the holder of the Lease of shard i ("" when none).
func (e *env) shardHolder(i int) string {
	l := &coordinationv1.Lease{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: shard.LeaseName(i)}, l); err != nil ||
		l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// syncedBy lists the instance keys of keys, once for each sync at sha the process's
// JSON log reports.
func syncedBy(p *cairnProcess, sha string, keys []string) []string {
	var out []string
	lines := strings.Split(p.out.String(), "\n")
	for _, key := range keys {
		for _, l := range lines {
			if strings.Contains(l, `"instance synced"`) && strings.Contains(l, `"instance":"`+key+`"`) && strings.Contains(l, sha) {
				out = append(out, key)
			}
		}
	}
	return out
}

// TestThreeShardedControllersConvergeAFleet: `cairn install --controller --replicas 3
// --shards 3` deploys three replicas that divide the instances into three shards;
// three `cairn controller` processes with the manifests' arguments and identity
// spread the shards (one each) and converge a fleet, each instance reconciled by
// exactly one of them. One SIGKILLed: the next commit still reaches every instance,
// its shard taken over once its Lease expires. One SIGSTOPped past its lease: its
// shard is taken over and the next commit applied without it; resumed, it writes
// nothing for the shard it lost.
func TestThreeShardedControllersConvergeAFleet(t *testing.T) {
	e := newEnv(t)
	bin := buildCairn(t)
	e.grantNamespace(e.ns, "*")
	var insts []inst
	var keys []string
	for i := range 12 {
		name := fmt.Sprintf("a%02d", i)
		insts = append(insts, inst{name: name, ns: e.ns, configs: configs("x"), extra: "  serviceAccountName: deployer\n"})
		keys = append(keys, e.ns+"/"+name)
	}
	repo := newGitRepo(t, appRepo("", insts...))
	head, err := repo.r.Head()
	e.g.Expect(err).NotTo(HaveOccurred())
	sha1 := head.Hash().String()
	e.installController(bin, repo, "--replicas", "3", "--shards", "3")
	var d appsv1.Deployment
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: "cairn-controller"}, &d)).To(Succeed())
	e.g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(3))
	e.g.Expect(strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")).To(ContainSubstring("--shards 3"))
	kubeconfig, _ := e.controllerIdentity()

	procs := make([]*cairnProcess, 3)
	for i := range procs {
		procs[i] = startCairnProcessWithEnv(t, bin, []string{fmt.Sprintf("POD_NAME=cairn-%d", i)},
			append(e.controllerArgsAs(t, repo, kubeconfig, freeLoopbackAddr(t), "0"), "--log-format", "json", "--shards", "3")...)
	}
	outputs := func() string {
		var b strings.Builder
		for i, p := range procs {
			fmt.Fprintf(&b, "--- cairn-%d:\n%s\n", i, p.String())
		}
		return b.String()
	}
	allAt := func(sha string) func() []string {
		return func() []string {
			var behind []string
			for _, key := range keys {
				ns, name, _ := strings.Cut(key, "/")
				if mi := e.instance(ns, name); mi == nil || mi.Status.LastAppliedRevision != sha || !isTrue(mi, "Ready") {
					behind = append(behind, key)
				}
			}
			return behind
		}
	}
	e.g.Eventually(allAt(sha1), 2*time.Minute, 250*time.Millisecond).Should(BeEmpty(), outputs)
	holders := func() map[string]int {
		out := map[string]int{}
		for i := range 3 {
			if h := e.shardHolder(i); h != "" {
				out[strings.SplitN(h, "_", 2)[0]]++
			}
		}
		return out
	}
	e.g.Eventually(holders, 30*time.Second, 250*time.Millisecond).Should(Equal(map[string]int{"cairn-0": 1, "cairn-1": 1, "cairn-2": 1}), outputs)
	var once []string
	for _, p := range procs {
		once = append(once, syncedBy(p, sha1, keys)...)
	}
	e.g.Expect(once).To(ConsistOf(keysAsAny(keys)...), "each instance synced once, by exactly one replica: %s", outputs())
	logSpread := func(sha string) {
		var spread []string
		for i, p := range procs {
			spread = append(spread, fmt.Sprintf("cairn-%d: %d", i, len(syncedBy(p, sha, keys))))
		}
		t.Logf("instances synced at %.8s by replica: %s", sha, strings.Join(spread, ", "))
	}
	logSpread(sha1)

	// SIGKILL one replica that does not lead: its shard is taken over.
	leader := strings.SplitN(e.leaseHolder(), "_", 2)[0]
	victim := 0
	for i := range procs {
		if fmt.Sprintf("cairn-%d", i) != leader {
			victim = i
			break
		}
	}
	e.g.Expect(procs[victim].cmd.Process.Kill()).To(Succeed())
	<-procs[victim].done
	for i := range insts {
		insts[i].configs = configs("x", "y")
	}
	files := map[string]string{}
	for _, in := range insts {
		files["instances/"+in.name+".yaml"] = in.yaml()
	}
	sha2 := repo.commit("add y everywhere", files)
	e.g.Eventually(allAt(sha2), 2*time.Minute, 250*time.Millisecond).Should(BeEmpty(), outputs)
	logSpread(sha2)
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		e.g.Expect(e.configMap(ns, name+"-y")).NotTo(BeNil())
	}

	// SIGSTOP the other replica that does not lead, past its lease: the leader's
	// replica takes its shards, and once resumed it writes nothing for them.
	stopped := -1
	for i := range procs {
		if i != victim && fmt.Sprintf("cairn-%d", i) != leader {
			stopped = i
		}
	}
	e.g.Expect(stopped).NotTo(Equal(-1))
	e.g.Expect(procs[stopped].cmd.Process.Signal(syscall.SIGSTOP)).To(Succeed())
	stoppedAt := time.Now()
	name := fmt.Sprintf("cairn-%d", stopped)
	e.g.Eventually(func() int { return holders()[name] }, 30*time.Second, 250*time.Millisecond).Should(BeZero(), outputs)
	t.Logf("the shard of the SIGSTOPped replica was taken over %s later", time.Since(stoppedAt).Round(100*time.Millisecond))
	for i := range insts {
		insts[i].configs = configs("x", "y", "z")
		files["instances/"+insts[i].name+".yaml"] = insts[i].yaml()
	}
	sha3 := repo.commit("add z everywhere", files)
	e.g.Eventually(allAt(sha3), 2*time.Minute, 250*time.Millisecond).Should(BeEmpty(), outputs)
	logSpread(sha3)
	e.g.Expect(syncedBy(procs[stopped], sha3, keys)).To(BeEmpty())
	resumedAt := len(procs[stopped].out.String())
	e.g.Expect(procs[stopped].cmd.Process.Signal(syscall.SIGCONT)).To(Succeed())
	time.Sleep(5 * time.Second)
	after := procs[stopped].out.String()[resumedAt:]
	t.Logf("the resumed replica's log:\n%s", tail(after, 15))
	e.g.Expect(after).NotTo(ContainSubstring(`"instance synced"`), "the resumed replica wrote nothing for the shards it lost:\n%s", after)
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		e.g.Expect(e.instance(ns, name).Status.LastAppliedRevision).To(Equal(sha3))
	}
}

func keysAsAny(keys []string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/test/harness"
)

// TestControllerImageRunsAsItsDeployment: the image `make image` builds, pulled by
// digest and unpacked, runs as `cairn install --controller`'s Deployment runs it: user
// 65532, read-only root file system, only its emptyDir volumes writable, no HOME, its
// args and env, the in-cluster config from the ServiceAccount's projected token. It
// takes the Lease; a tenant's CUE instance from the repository, a CUE module with a
// dependency from a registry, a Helm chart and a Timoni module (all three signed,
// under Enforce) become Ready, their caches in the cache volume; /healthz and /readyz
// answer 200.
func TestControllerImageRunsAsItsDeployment(t *testing.T) {
	tools := requireContainerTools(t)
	reg := startRegistry(t, false, false)
	ref, bin := makeImage(t, reg.Host)
	root, img := unpackImage(t, ref)

	e := newEnv(t)
	e.grantNamespace(e.ns, "*")
	keys := newKeyPair(t)
	e.putCairnSecret("pub-"+e.ns, corev1.SecretTypeOpaque, map[string][]byte{"cosign.pub": keys.public})
	e.pushImageRunModules(reg, keys)
	repo := newGitRepo(t, imageRunRepo(e.ns, reg.Host))
	out := e.runCairn(bin, "install", "--controller", "--repo", serveGitHTTP(t, repo), "--image", ref,
		"--interval", "2s", "--kubeconfig", e.cluster.Kubeconfig)
	t.Cleanup(func() { _, _ = runCairnCommand(bin, "uninstall", "--kubeconfig", e.cluster.Kubeconfig) })
	e.g.Expect(out).To(ContainSubstring("Deployment/cairn-system/cairn-controller created"))

	p := e.newContainerPod("cairn-controller-5d8c7b9f4-x2x7q", root, img, tools).start(t)
	e.g.Eventually(e.leaseHolder, time.Minute, 200*time.Millisecond).Should(HavePrefix(p.name+"_"), p.proc.String)
	for _, name := range []string{"tenant", "redis", "hello", "web"} {
		e.g.Eventually(func() string { return e.readyMessage(e.ns, name) }, 2*time.Minute, 200*time.Millisecond).
			Should(HavePrefix("True"), func() string { return name + ": " + p.proc.String() })
	}
	for _, name := range []string{"redis", "hello", "web"} {
		e.g.Expect(isTrue(e.instance(e.ns, name), cairnv1.VerifiedCondition)).To(BeTrue(), name)
	}
	e.expectTimoniApp("web", 2, "green", "1.0.0")
	e.g.Expect(e.configMap(e.ns, "hello-greeting")).NotTo(BeNil())
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + p.addrs["probes"] + path)
		e.g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		e.g.Expect(resp.StatusCode).To(Equal(http.StatusOK), path)
	}
	e.expectContained(p)

	// The next commit renders both registry modules again, from the caches in the volume.
	sha := repo.commit("redis: 48mb; web: 3 replicas", map[string]string{
		"instances/redis.yaml": redisInstance(e.ns, "48mb"), "instances/web.yaml": webInstance(e.ns, reg.Host, 3)})
	e.g.Eventually(func() map[string]string { return e.configMap(e.ns, "redis").Data }, time.Minute, 200*time.Millisecond).
		Should(HaveKeyWithValue("redis.conf", ContainSubstring("maxmemory 48mb")), p.proc.String)
	e.g.Eventually(func() string { return e.readyMessage(e.ns, "web") + e.instance(e.ns, "web").Status.LastAppliedRevision },
		time.Minute, 200*time.Millisecond).Should(And(HavePrefix("True"), HaveSuffix(sha)), p.proc.String)
	e.expectTimoniApp("web", 3, "green", "1.0.0")
	for _, bad := range []string{"read-only file system", "permission denied", "$HOME", "$XDG_"} {
		e.g.Expect(p.proc.out.String()).NotTo(ContainSubstring(bad), "nothing is written outside the volumes, nothing needs HOME")
	}
	cache := p.volumes["cache"]
	e.g.Expect(cache).NotTo(BeEmpty(), "the Deployment's cache volume")
	e.g.Expect(filepath.Join(cache, "git")).To(BeADirectory(), "the Git clone lives in the cache volume")
	e.g.Expect(filepath.Join(cache, "modules")).To(BeADirectory(), "the modules' cache lives in the cache volume")
	t.Logf("the cache volume holds:\n%s", treeOf(t, cache, 3))
	e.logEverything()
}

// pushImageRunModules pushes and signs with keys, to reg: the example CUE modules
// redis and catalog, the hello chart and the webapp Timoni module.
func (e *env) pushImageRunModules(reg *testRegistry, keys keyPair) {
	e.t.Helper()
	rc := registryClient(e.t, reg, false)
	mr := render.ModuleRegistry{Host: reg.Host, PlainHTTP: true}
	for _, m := range []struct{ dir, path string }{
		{"../../examples/registry/catalog", "cairn.dev/examples/catalog"},
		{"../../examples/registry/redis", "cairn.dev/examples/redis"},
	} {
		d, err := render.PushModule(e.ctx, m.dir, mr, "v0.1.0")
		e.g.Expect(err).NotTo(HaveOccurred(), m.dir)
		e.g.Expect(rc.Sign(e.ctx, render.ModuleRepository(mr, m.path), digestOf(d), keys.key)).To(Succeed())
	}
	pushChart(e.t, e.ctx, rc, "charts/hello", chartArchive(e.t, "hello", "0.1.0", ""), keys.key)
	timoni, err := harness.PushTimoniArtifact(e.ctx, reg.Host, "modules/webapp", "1.0.0",
		harness.TimoniArtifact{Layers: timoniLayers(copyDir(e.t, timoniModuleDir, ""))})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(rc.Sign(e.ctx, "modules/webapp", digestOf(timoni), keys.key)).To(Succeed())
}

// imageRunRepo is the platform repository of the image test: under Enforce, with the
// registry at host trusting the key in Secret pub-<ns>, four instances in ns applying
// as its ServiceAccount deployer.
func imageRunRepo(ns, host string) map[string]string {
	const sa = "  serviceAccountName: deployer\n"
	files := appRepo("", inst{name: "tenant", ns: ns, replicas: 0, configs: configs("x"), extra: sa})
	files["platform.yaml"] = platformWithVerify("Enforce", "  moduleRegistry: local\n")
	files["registries.yaml"] = registryYAML("local", host, true,
		"  verify:\n    cosign:\n      publicKeys: [{secretRef: {name: pub-"+ns+"}}]\n")
	files["instances/redis.yaml"] = redisInstance(ns, "32mb")
	files["instances/hello.yaml"] = chartInstanceYAML("hello", ns, "oci://"+host+"/charts/hello", "0.1.0", sa)
	files["instances/web.yaml"] = webInstance(ns, host, 2)
	return files
}

// redisInstance declares the example redis module of the registry in ns.
func redisInstance(ns, maxMemory string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: redis\n"+
		"  namespace: %s\nspec:\n  module:\n    cue:\n      path: cairn.dev/examples/redis@v0\n      version: v0.1.0\n"+
		"  timeout: 1m\n  values:\n    maxMemory: %s\n  serviceAccountName: deployer\n", ns, maxMemory)
}

// webInstance declares the webapp Timoni module of the registry at host in ns.
func webInstance(ns, host string, replicas int) string {
	return timoniInstance("web", ns, "url: 'oci://"+host+"/modules/webapp', version: '1.0.0'",
		fmt.Sprintf("{replicas: %d, env: {COLOR: green}}", replicas)) + "  serviceAccountName: deployer\n"
}

// expectContained checks every process of the container from the host: each runs as
// the container's user and groups with no capability and no new privileges, chrooted
// into the image's root, mounted read-only, without HOME in its environment.
func (e *env) expectContained(p *containerPod) {
	e.t.Helper()
	pids := descendants(p.proc.cmd.Process.Pid)
	var seen int
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d", pid)
		if root, _ := os.Readlink(dir + "/root"); root != p.root {
			continue // unshare and the setup before its chroot
		}
		seen++
		status, err := os.ReadFile(dir + "/status")
		e.g.Expect(err).NotTo(HaveOccurred())
		want := fmt.Sprintf("%d\t%d\t%d\t%d", p.uid, p.uid, p.uid, p.uid)
		e.g.Expect(statusField(status, "Uid")).To(Equal(want), "pid %d", pid)
		e.g.Expect(statusField(status, "Gid")).To(HavePrefix(strconv.FormatInt(p.gid, 10)+"\t"), "pid %d", pid)
		e.g.Expect(statusField(status, "CapEff")).To(MatchRegexp("^0+$"), "pid %d", pid)
		e.g.Expect(statusField(status, "NoNewPrivs")).To(Equal("1"), "pid %d", pid)
		environ, err := os.ReadFile(dir + "/environ")
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Expect(strings.Split(string(environ), "\x00")).NotTo(ContainElement(HavePrefix("HOME=")), "pid %d", pid)
		mountinfo, err := os.ReadFile(dir + "/mountinfo")
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Expect(rootMountOptions(string(mountinfo))).To(ContainElement("ro"), "pid %d: the root file system", pid)
	}
	e.g.Expect(seen).To(BeNumerically(">=", 1), "the controller's process in the container")
}

// descendants lists the processes under pid, children first.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, de := range entries {
		child, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], child)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// statusField is the value of a field of /proc/PID/status.
func statusField(status []byte, name string) string {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// rootMountOptions are the mount options of "/" in a process's mountinfo (the last
// mount there wins).
func rootMountOptions(mountinfo string) []string {
	var opts []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			opts = strings.Split(f[5], ",")
		}
	}
	return opts
}

// treeOf lists the directories under dir to depth levels, for the log.
func treeOf(t *testing.T, dir string, depth int) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if n := strings.Count(rel, string(filepath.Separator)); d.IsDir() && n >= depth {
			return filepath.SkipDir
		}
		if d.IsDir() && rel != "." {
			fmt.Fprintf(&b, "  %s/\n", rel)
		}
		return nil
	})
	return b.String()
}

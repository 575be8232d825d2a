package e2e

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

// serviceAccountDir is where the kubelet mounts a pod's ServiceAccount token, its
// cluster's CA and its namespace (rest.InClusterConfig reads them there).
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// containerTools are the host programs that stand in for a container runtime.
var containerTools = []string{"unshare", "mount", "setpriv", "chroot", "env"}

// requireContainerTools fails the test unless it runs as root with util-linux and
// coreutils: mount namespaces, bind mounts and chroot need both.
func requireContainerTools(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("running the image as a container needs root (mount namespace, bind mounts, chroot): run make test as root, as .ci/run does")
	}
	paths := map[string]string{}
	for _, tool := range containerTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("running the image as a container needs %s (util-linux, coreutils; hack/prereqs.sh installs them): %v", tool, err)
		}
		paths[tool] = p
	}
	return paths
}

// containerPod is a replica of the controller's Deployment run from the image's
// unpacked layers as a container runtime runs it, without one: in a mount and PID
// namespace of its own, the root file system read-only, only the Deployment's volumes
// and the ServiceAccount's projected token mounted, its user and group, no new
// privileges, its entrypoint, args and env and nothing else (no HOME). It shares the
// host's network (the API server and the registry are on loopback), so its container
// ports move to free loopback addresses.
type containerPod struct {
	name      string
	root      string // the unpacked image
	mounts    []containerMount
	volumes   map[string]string // volume name -> host directory
	addrs     map[string]string // container port name -> 127.0.0.1:PORT
	argv, env []string
	uid, gid  int64
	groups    []int64
	tools     map[string]string
	proc      *cairnProcess
}

// containerMount is a directory of the host mounted at path in the container.
type containerMount struct {
	source, path string
	readOnly     bool
}

// newContainerPod prepares replica name of the installed Deployment from the image's
// root file system and config.
func (e *env) newContainerPod(name, root string, img *v1.ConfigFile, tools map[string]string) *containerPod {
	e.t.Helper()
	d := &appsv1.Deployment{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: controller.Name}, d)).To(Succeed())
	spec := d.Spec.Template.Spec
	e.g.Expect(spec.Containers).To(HaveLen(1))
	c := spec.Containers[0]
	e.g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "the Deployment's root file system is read-only")
	e.g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	p := &containerPod{name: name, root: root, volumes: map[string]string{}, addrs: map[string]string{}, tools: tools}
	p.uid, p.gid, p.groups = e.podUser(spec, c)
	for _, port := range c.Ports {
		p.addrs[port.Name] = freeLoopbackAddr(e.t)
	}
	p.argv = p.commandLine(img, c)
	p.env = e.containerEnv(name, d, c, img)
	e.mountPodVolumes(p, spec, c)
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.mounts = append(p.mounts, containerMount{source: e.serviceAccountVolume(p), path: serviceAccountDir, readOnly: true})
	}
	for _, dir := range append([]string{"proc", "dev"}, p.mountPaths()...) {
		e.g.Expect(os.MkdirAll(filepath.Join(root, dir), 0o755)).To(Succeed(), "a runtime makes the mount points")
	}
	return p
}

// podUser is the user and groups the container runs as: its securityContext over the
// pod's, fsGroup a supplementary group.
func (e *env) podUser(spec corev1.PodSpec, c corev1.Container) (uid, gid int64, groups []int64) {
	psc, csc := spec.SecurityContext, c.SecurityContext
	e.g.Expect(psc).NotTo(BeNil())
	e.g.Expect(psc.RunAsUser).NotTo(BeNil())
	e.g.Expect(psc.RunAsGroup).NotTo(BeNil())
	uid, gid = *psc.RunAsUser, *psc.RunAsGroup
	if csc.RunAsUser != nil {
		uid = *csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		gid = *csc.RunAsGroup
	}
	groups = []int64{gid}
	if psc.FSGroup != nil && *psc.FSGroup != gid {
		groups = append(groups, *psc.FSGroup)
	}
	return uid, gid, groups
}

// commandLine is the image's entrypoint (or the container's command) and the
// container's args, a bind address ":PORT" of a container port moved to loopback.
func (p *containerPod) commandLine(img *v1.ConfigFile, c corev1.Container) []string {
	argv := append([]string(nil), img.Config.Entrypoint...)
	if len(c.Command) > 0 {
		argv = append([]string(nil), c.Command...)
	}
	ports := map[string]string{}
	for _, port := range c.Ports {
		ports[fmt.Sprintf(":%d", port.ContainerPort)] = p.addrs[port.Name]
	}
	for _, a := range c.Args {
		if addr, ok := ports[a]; ok {
			a = addr
		}
		argv = append(argv, a)
	}
	return argv
}

// containerEnv is the environment a kubelet and containerd give the container: PATH,
// the image's env, HOSTNAME, the container's env (the downward API resolved) and the
// kubernetes Service's variables. No HOME: the Deployment sets none.
func (e *env) containerEnv(podName string, d *appsv1.Deployment, c corev1.Container, img *v1.ConfigFile) []string {
	e.t.Helper()
	u, err := url.Parse(e.cluster.APIServerURL)
	e.g.Expect(err).NotTo(HaveOccurred())
	vars := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	vars = append(vars, img.Config.Env...)
	vars = append(vars, "HOSTNAME="+podName)
	for _, v := range c.Env {
		vars = append(vars, v.Name+"="+e.envValue(v, podName, d.Namespace, c))
	}
	vars = append(vars, "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port())
	return mergeEnv(vars)
}

// envValue resolves one variable of the container as the kubelet does.
func (e *env) envValue(v corev1.EnvVar, podName, namespace string, c corev1.Container) string {
	e.t.Helper()
	switch {
	case v.ValueFrom == nil:
		return v.Value
	case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return podName
	case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
		return namespace
	case v.ValueFrom.ResourceFieldRef != nil:
		rf := v.ValueFrom.ResourceFieldRef
		kind, res, _ := strings.Cut(rf.Resource, ".")
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		q, ok := list[corev1.ResourceName(res)]
		e.g.Expect(ok).To(BeTrue(), "%s: the container sets no %s (the kubelet would give the node's)", v.Name, rf.Resource)
		div := rf.Divisor
		if div.IsZero() {
			div = resource.MustParse("1")
		}
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(div.MilliValue()))))
	}
	e.t.Fatalf("env %s: the test does not resolve %+v", v.Name, v.ValueFrom)
	return ""
}

// mergeEnv keeps the last value of each name, in the order names first appear.
func mergeEnv(vars []string) []string {
	at := map[string]int{}
	var out []string
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// mountPodVolumes makes a host directory for each of the container's volume mounts: an
// emptyDir is empty, world-writable and of the fsGroup (as the kubelet makes it), a
// Secret holds its keys as files; any other kind of volume fails the test.
func (e *env) mountPodVolumes(p *containerPod, spec corev1.PodSpec, c corev1.Container) {
	e.t.Helper()
	base := e.t.TempDir()
	for _, m := range c.VolumeMounts {
		var v *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				v = &spec.Volumes[i]
			}
		}
		e.g.Expect(v).NotTo(BeNil(), "volume %s", m.Name)
		dir := filepath.Join(base, m.Name)
		e.g.Expect(os.Mkdir(dir, 0o755)).To(Succeed())
		readOnly := m.ReadOnly
		switch {
		case v.EmptyDir != nil:
			e.g.Expect(os.Chown(dir, 0, int(p.fsGroup()))).To(Succeed())
			e.g.Expect(os.Chmod(dir, 0o777|os.ModeSetgid)).To(Succeed())
		case v.Secret != nil:
			e.writeSecretVolume(dir, v.Secret, p.fsGroup())
			readOnly = true
		default:
			e.t.Fatalf("volume %s: the test mounts emptyDir and Secret volumes only", m.Name)
		}
		p.volumes[m.Name] = dir
		p.mounts = append(p.mounts, containerMount{source: dir, path: m.MountPath, readOnly: readOnly})
	}
}

// fsGroup is the pod's fsGroup, else its group.
func (p *containerPod) fsGroup() int64 { return p.groups[len(p.groups)-1] }

// writeSecretVolume writes the Secret's keys into dir with the volume's mode.
func (e *env) writeSecretVolume(dir string, v *corev1.SecretVolumeSource, group int64) {
	e.t.Helper()
	s := &corev1.Secret{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: v.SecretName}, s)).To(Succeed())
	mode := os.FileMode(0o644)
	if v.DefaultMode != nil {
		mode = os.FileMode(*v.DefaultMode)
	}
	for k, data := range s.Data {
		p := filepath.Join(dir, k)
		e.g.Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
		e.g.Expect(os.Chown(p, 0, int(group))).To(Succeed())
		e.g.Expect(os.Chmod(p, mode)).To(Succeed())
	}
}

// serviceAccountVolume writes what the kubelet projects for the pod's ServiceAccount:
// a token of it (the TokenRequest API), the cluster's CA and the namespace.
func (e *env) serviceAccountVolume(p *containerPod) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), "serviceaccount")
	e.g.Expect(os.Mkdir(dir, 0o755)).To(Succeed())
	ca := e.cluster.RESTConfig.CAData
	if len(ca) == 0 {
		var err error
		ca, err = os.ReadFile(e.cluster.RESTConfig.CAFile)
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	files := map[string][]byte{"token": []byte(e.controllerToken()), "ca.crt": ca, "namespace": []byte(reconciler.DefaultNamespace)}
	for name, data := range files {
		path := filepath.Join(dir, name)
		e.g.Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
		e.g.Expect(os.Chown(path, 0, int(p.fsGroup()))).To(Succeed())
		e.g.Expect(os.Chmod(path, 0o640)).To(Succeed())
	}
	return dir
}

func (p *containerPod) mountPaths() []string {
	var paths []string
	for _, m := range p.mounts {
		paths = append(paths, m.path)
	}
	return paths
}

// setup is the shell script run as root in the new mount and PID namespaces before
// the container's process: /proc, a minimal /dev, the volumes, then the root made
// read-only; then it runs its arguments and stays the namespace's init (as `docker run
// --init` does). It does not exec them: chroot's change of user clears the
// parent-death signal unshare's --kill-child sets, while the shell keeps it, so the
// kernel kills the namespace with it when unshare or the test dies.
func (p *containerPod) setup() string {
	var b strings.Builder
	in := func(path string) string { return shellQuote(filepath.Join(p.root, path)) }
	b.WriteString("set -e\nmount --make-rprivate /\n")
	fmt.Fprintf(&b, "mount --bind %s %s\n", shellQuote(p.root), shellQuote(p.root))
	fmt.Fprintf(&b, "mount -t proc -o nosuid,nodev,noexec proc %s\n", in("proc"))
	fmt.Fprintf(&b, "mount -t tmpfs -o nosuid,mode=0755 tmpfs %s\n", in("dev"))
	for _, dev := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		fmt.Fprintf(&b, ": > %[1]s\nmount --bind /dev/%[2]s %[1]s\n", in("dev/"+dev), dev)
	}
	for _, m := range p.mounts {
		fmt.Fprintf(&b, "mount --bind %s %s\n", shellQuote(m.source), in(m.path))
		if m.readOnly {
			fmt.Fprintf(&b, "mount -o remount,bind,ro %s\n", in(m.path))
		}
	}
	fmt.Fprintf(&b, "mount -o remount,bind,ro %s\n", shellQuote(p.root))
	b.WriteString("\"$@\"\n")
	return b.String()
}

// command is the whole command line: unshare runs setup, which execs env with only
// the container's environment, setpriv (no new privileges) and chroot into the root as
// the container's user and groups, which execs the entrypoint.
func (p *containerPod) command() *exec.Cmd {
	groups := make([]string, len(p.groups))
	for i, g := range p.groups {
		groups[i] = fmt.Sprint(g)
	}
	args := []string{"--mount", "--pid", "--fork", "--kill-child", "sh", "-c", p.setup(), "sh", p.tools["env"], "-i"}
	args = append(args, p.env...)
	args = append(args, p.tools["setpriv"], "--no-new-privs", p.tools["chroot"],
		fmt.Sprintf("--userspec=%d:%d", p.uid, p.gid), "--groups="+strings.Join(groups, ","), p.root)
	cmd := exec.Command(p.tools["unshare"], append(args, p.argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// start runs the container; the test's end kills it with every process of its
// namespace.
func (p *containerPod) start(t *testing.T) *containerPod {
	t.Helper()
	p.proc = &cairnProcess{cmd: p.command(), out: &lockedBuffer{}, done: make(chan struct{})}
	p.proc.cmd.Stdout, p.proc.cmd.Stderr = p.proc.out, p.proc.out
	if err := p.proc.cmd.Start(); err != nil {
		t.Fatalf("failed to start the container: %v", err)
	}
	go func() {
		p.proc.err = p.proc.cmd.Wait()
		close(p.proc.done)
	}()
	t.Cleanup(func() {
		inside := descendants(p.proc.cmd.Process.Pid)
		_ = p.proc.cmd.Process.Kill()
		for _, pid := range inside {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		<-p.proc.done
		if t.Failed() {
			t.Logf("the container's output:\n%s", p.proc.out.String())
		}
	})
	return p
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

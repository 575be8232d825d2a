package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	"cairn.dev/cairn/manifests/controller"
	"cairn.dev/cairn/reconciler"
)

// testImage is a reference by digest for the Deployment; kwok runs no container, so
// it is never pulled.
const testImage = "127.0.0.1:5000/cairn/cairn@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// installController runs `cairn install --controller` as the admin, with args added,
// and uninstalls the controller at the end of the test.
func (e *env) installController(bin string, repo *gitRepo, args ...string) string {
	e.t.Helper()
	all := append([]string{"install", "--controller", "--repo", repo.url(), "--image", testImage, "--kubeconfig", e.cluster.Kubeconfig}, args...)
	out := e.runCairn(bin, all...)
	e.t.Cleanup(func() { _, _ = runCairnCommand(bin, "uninstall", "--kubeconfig", e.cluster.Kubeconfig) })
	return out
}

// runCairn runs a cairn command to its end and returns its output; it must succeed.
func (e *env) runCairn(bin string, args ...string) string {
	e.t.Helper()
	out, err := runCairnCommand(bin, args...)
	e.g.Expect(err).NotTo(HaveOccurred(), out)
	return out
}

// controllerIdentity mints a token of the manifests' ServiceAccount with the
// TokenRequest API and writes a kubeconfig holding only that token: what the pod's
// projected token gives the controller in the cluster.
func (e *env) controllerIdentity() (kubeconfig string, cfg *rest.Config) {
	e.t.Helper()
	token := e.controllerToken()
	cfg = &rest.Config{Host: e.cluster.RESTConfig.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: e.cluster.RESTConfig.CAData, CAFile: e.cluster.RESTConfig.CAFile}}
	kc := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server, cluster.CertificateAuthorityData, cluster.CertificateAuthority = cfg.Host, cfg.CAData, cfg.CAFile
	kc.Clusters["cluster"] = cluster
	kc.AuthInfos["cairn-controller"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["cairn-controller"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "cairn-controller"}
	kc.CurrentContext = "cairn-controller"
	kubeconfig = filepath.Join(e.t.TempDir(), "kubeconfig")
	e.g.Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())
	return kubeconfig, cfg
}

// controllerToken mints a token of the manifests' ServiceAccount, valid for an hour,
// with the TokenRequest API (as the kubelet does for a pod's projected token).
func (e *env) controllerToken() string {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(reconciler.DefaultNamespace).CreateToken(e.ctx, controller.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	e.g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// pod is a replica of the controller's Deployment run as a local process: a stand-in
// kubelet for a cluster without containers.
type pod struct {
	name       string
	kubeconfig string
	root       string            // the container's file system root for its volumes
	addrs      map[string]string // container port name -> 127.0.0.1:PORT
	args, env  []string
	proc       *cairnProcess
}

// newPod prepares replica name of the installed Deployment: exactly its args and
// env, with the two things a kubelet and the pod network would give: the volume mounts
// (the Secrets written as files under a root of its own) and the ports (on loopback,
// so that replicas on one machine do not collide).
func (e *env) newPod(name, kubeconfig string) *pod {
	e.t.Helper()
	d := &appsv1.Deployment{}
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: controller.Name}, d)).To(Succeed())
	c := d.Spec.Template.Spec.Containers[0]
	p := &pod{name: name, kubeconfig: kubeconfig, root: e.t.TempDir(), addrs: map[string]string{}}
	for _, port := range c.Ports {
		p.addrs[port.Name] = freeLoopbackAddr(e.t)
	}
	e.mountVolumes(p, d.Spec.Template.Spec, c)
	p.args = p.rewrite(c)
	for _, v := range c.Env {
		switch {
		case v.ValueFrom != nil && v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.name":
			p.env = append(p.env, v.Name+"="+name)
		case v.ValueFrom != nil && v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			p.env = append(p.env, v.Name+"="+d.Namespace)
		case v.ValueFrom == nil:
			p.env = append(p.env, v.Name+"="+v.Value)
		}
	}
	p.env = append(p.env, "KUBECONFIG="+kubeconfig) // in the pod: the projected token of the ServiceAccount
	return p
}

// mountVolumes writes each Secret volume's data under p.root at its mount path and
// makes each emptyDir.
func (e *env) mountVolumes(p *pod, spec corev1.PodSpec, c corev1.Container) {
	e.t.Helper()
	for _, m := range c.VolumeMounts {
		dir := filepath.Join(p.root, m.MountPath)
		e.g.Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			s := &corev1.Secret{}
			e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: reconciler.DefaultNamespace, Name: v.Secret.SecretName}, s)).To(Succeed())
			for k, data := range s.Data {
				e.g.Expect(os.WriteFile(filepath.Join(dir, k), data, 0o400)).To(Succeed())
			}
		}
	}
}

// rewrite maps the container's args onto this machine: a path under a mount moves
// under p.root, a bind address ":PORT" of a container port becomes its loopback address.
func (p *pod) rewrite(c corev1.Container) []string {
	ports := map[string]string{}
	for _, port := range c.Ports {
		ports[fmt.Sprintf(":%d", port.ContainerPort)] = p.addrs[port.Name]
	}
	out := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		if addr, ok := ports[a]; ok {
			a = addr
		}
		for _, m := range c.VolumeMounts {
			if a == m.MountPath || strings.HasPrefix(a, m.MountPath+"/") {
				a = filepath.Join(p.root, a)
			}
		}
		out = append(out, a)
	}
	return out
}

// start runs the replica.
func (p *pod) start(t *testing.T, bin string) *pod {
	t.Helper()
	p.proc = startCairnProcessWithEnv(t, bin, p.env, p.args...)
	return p
}

// runCairnCommand runs a cairn command to its end with no $KUBECONFIG of the test's.
func runCairnCommand(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

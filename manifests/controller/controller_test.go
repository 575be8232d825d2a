package controller

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const testImage = "registry.example.com/cairn/cairn@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testOptions() Options {
	o := DefaultOptions()
	o.Repo, o.Image = "https://git.example.com/platform.git", testImage
	return o
}

func withCredentials() Options {
	o := testOptions()
	o.GitUsername = "cairn"
	o.Forge, o.ForgeURL, o.ForgeRepo = "gitea", "https://git.example.com", "ops/platform"
	o.Credentials = Credentials{GitPassword: []byte("s3cr3t-git"), ForgeToken: []byte("s3cr3t-forge"), WebhookSecret: []byte("hook")}
	o.AllowApplyAsController = true
	return o
}

// TestGolden: the manifests of a default install, and of one with every credential
// and the apply-as-controller opt-in, are the reviewed YAML in testdata/.
func TestGolden(t *testing.T) {
	for name, o := range map[string]Options{"default": testOptions(), "credentials": withCredentials()} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := Objects(o)
			g.Expect(err).NotTo(HaveOccurred())
			us, err := ToUnstructured(objs...)
			g.Expect(err).NotTo(HaveOccurred())
			got, err := YAML(us)
			g.Expect(err).NotTo(HaveOccurred())
			golden := filepath.Join("testdata", name+".yaml")
			if *update {
				g.Expect(os.WriteFile(golden, got, 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(golden)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(got)).To(Equal(string(want)), "go test ./manifests/controller -update rewrites it")
			g.Expect(string(got)).NotTo(ContainSubstring("s3cr3t"), "no credential in the manifests")
		})
	}
}

// TestValidate: options that cannot make a working controller are refused, naming the flag.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		err  string
	}{
		{"default", func(*Options) {}, ""},
		{"no repo", func(o *Options) { o.Repo = "" }, "--repo is required"},
		{"a directory", func(o *Options) { o.Repo = "./platform" }, "is not a Git URL"},
		{"ssh scp-like", func(o *Options) {
			o.Repo, o.Credentials.SSHKey, o.Credentials.KnownHosts = "git@git.example.com:ops/p.git", []byte("k"), []byte("h")
		}, ""},
		{"ssh key without known hosts", func(o *Options) { o.Credentials.SSHKey = []byte("k") }, "--known-hosts is required"},
		{"password and ssh key", func(o *Options) {
			o.Credentials = Credentials{GitPassword: []byte("p"), SSHKey: []byte("k"), KnownHosts: []byte("h")}
		}, "not both"},
		{"forge without token", func(o *Options) { o.Forge = "github" }, "--forge needs --forge-token-file"},
		{"token without forge", func(o *Options) { o.Credentials.ForgeToken = []byte("t") }, "needs --forge"},
		{"zero interval", func(o *Options) { o.Interval = 0 }, "--interval must be positive"},
		{"no image", func(o *Options) { o.Image = "" }, "run `make image`"},
		{"a tag", func(o *Options) { o.Image = "registry.example.com/cairn/cairn:v1" }, "not a reference by digest"},
		{"a short digest", func(o *Options) { o.Image = "registry.example.com/cairn/cairn@sha256:0123" }, "not a reference by digest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			o := testOptions()
			tt.edit(&o)
			err := o.Validate()
			if tt.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
		})
	}
}

func find[T client.Object](objs []client.Object, name string) T {
	for _, o := range objs {
		if t, ok := o.(T); ok && o.GetName() == name {
			return t
		}
	}
	var zero T
	return zero
}

// TestDeploymentArgs: the Deployment runs `cairn controller --leader-elect` with the
// source flags, and each credential flag names the file its Secret is mounted as.
func TestDeploymentArgs(t *testing.T) {
	g := NewWithT(t)
	o := withCredentials()
	o.Branch, o.Path, o.Interval = "prod", "clusters/eu", 30*time.Second
	objs, err := Objects(o)
	g.Expect(err).NotTo(HaveOccurred())
	d := find[*appsv1.Deployment](objs, Name)
	c := d.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	g.Expect(args).To(HavePrefix("controller --leader-elect --namespace cairn-system --repo https://git.example.com/platform.git " +
		"--branch prod --path clusters/eu --interval 30s --cache-dir /var/cache/cairn"))
	g.Expect(args).To(ContainSubstring("--git-username cairn --git-password-file /etc/cairn/git/password " +
		"--forge-token-file /etc/cairn/forge/token --webhook-secret-file /etc/cairn/webhook/secret"))
	g.Expect(args).To(ContainSubstring("--forge gitea --forge-url https://git.example.com --forge-repo ops/platform --webhook-bind-address :9292"))
	g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: GitSecret, MountPath: "/etc/cairn/git", ReadOnly: true}))
	g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "cache", MountPath: CacheDir}))
	secrets := Secrets(o)
	g.Expect(secrets).To(HaveLen(3))
	g.Expect(secrets[0].Data).To(Equal(map[string][]byte{"password": []byte("s3cr3t-git")}))

	plain, err := Objects(testOptions())
	g.Expect(err).NotTo(HaveOccurred())
	pc := find[*appsv1.Deployment](plain, Name).Spec.Template.Spec.Containers[0]
	g.Expect(pc.Args).NotTo(ContainElement("--webhook-bind-address"), "no webhook receiver without its secret")
	g.Expect(strings.Join(pc.Args, " ")).To(HaveSuffix("--shards 1"), "the instances reconciled on the queue of the replica holding the one shard by default")
	leader := testOptions()
	leader.Shards = 0
	lo, err := Objects(leader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Join(find[*appsv1.Deployment](lo, Name).Spec.Template.Spec.Containers[0].Args, " ")).To(HaveSuffix("--shards 0"), "0 is written, not left to the default")
	sharded := testOptions()
	sharded.Replicas, sharded.Shards = 3, 3
	so, err := Objects(sharded)
	g.Expect(err).NotTo(HaveOccurred())
	sd := find[*appsv1.Deployment](so, Name)
	g.Expect(*sd.Spec.Replicas).To(BeEquivalentTo(3))
	g.Expect(strings.Join(sd.Spec.Template.Spec.Containers[0].Args, " ")).To(HaveSuffix("--shards 3"))
	g.Expect(pc.VolumeMounts).To(HaveLen(2), "only the cache and /tmp")
	g.Expect(Secrets(testOptions())).To(BeEmpty())
}

// TestPodHardening: non-root, read-only root file system, no privilege escalation, no
// capabilities, the runtime's seccomp profile; the pod's name and namespace from the
// downward API; probes on the probe port.
func TestPodHardening(t *testing.T) {
	g := NewWithT(t)
	objs, err := Objects(testOptions())
	g.Expect(err).NotTo(HaveOccurred())
	d := find[*appsv1.Deployment](objs, Name)
	g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
	ps := d.Spec.Template.Spec
	g.Expect(ps.ServiceAccountName).To(Equal(Name))
	g.Expect(*ps.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(ps.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	c := ps.Containers[0]
	g.Expect(c.Image).To(Equal(testImage))
	sc := c.SecurityContext
	g.Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	g.Expect(c.Env[0].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.name"))
	g.Expect(c.Env[1].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.namespace"))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.Resources.Requests).NotTo(BeEmpty())
	g.Expect(c.Resources.Limits).NotTo(BeEmpty())
}

// workloadRules are the rules of cr on the apps group.
func workloadRules(cr *rbacv1.ClusterRole) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range cr.Rules {
		if slices.Contains(r.APIGroups, "apps") {
			out = append(out, r)
		}
	}
	return out
}

// TestRBACIsLeastPrivilege: Secrets and ConfigMaps only in cairn's namespace (a Role),
// no wildcard, no group impersonation, workloads only watched, no cluster-admin unless
// opted in.
func TestRBACIsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	objs, err := Objects(testOptions())
	g.Expect(err).NotTo(HaveOccurred())
	cr := find[*rbacv1.ClusterRole](objs, Name)
	for _, r := range cr.Rules {
		g.Expect(r.Resources).NotTo(ContainElement("*"))
		g.Expect(r.Verbs).NotTo(ContainElement("*"))
		g.Expect(r.Resources).NotTo(ContainElements("secrets", "configmaps", "groups", "users"))
		if slices.Contains(r.Verbs, "impersonate") {
			g.Expect(r.Resources).To(Equal([]string{"serviceaccounts"}))
		}
	}
	dash := find[*rbacv1.ClusterRole](objs, DashboardRole)
	for _, r := range dash.Rules {
		g.Expect(r.Verbs).To(Equal([]string{"create"}), "the dashboard reviews tokens and access; it impersonates nobody")
	}
	g.Expect(workloadRules(cr)).To(ConsistOf(rbacv1.PolicyRule{APIGroups: []string{"apps"},
		Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"list", "watch"}}),
		"workloads are watched for their health, never read one by one or written as cairn")
	o := testOptions()
	o.NoWorkloadWatch = true
	unwatched, err := Objects(o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(workloadRules(find[*rbacv1.ClusterRole](unwatched, Name))).To(BeEmpty(), "--no-workload-watch")
	role := find[*rbacv1.Role](objs, Name)
	g.Expect(role.Namespace).To(Equal(DefaultNamespace))
	for _, r := range role.Rules {
		g.Expect(r.Verbs).NotTo(ContainElement("*"))
		if slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "jobs") {
			g.Expect(r.Verbs).NotTo(ContainElements("update", "patch"), "render Jobs are made and removed, never changed")
		}
	}
	g.Expect(find[*rbacv1.ClusterRoleBinding](objs, ApplyAsControllerBinding)).To(BeNil())

	opted, err := Objects(withCredentials())
	g.Expect(err).NotTo(HaveOccurred())
	b := find[*rbacv1.ClusterRoleBinding](opted, ApplyAsControllerBinding)
	g.Expect(b).NotTo(BeNil())
	g.Expect(b.RoleRef.Name).To(Equal("cluster-admin"))
	g.Expect(b.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: Name, Namespace: DefaultNamespace}}))
}

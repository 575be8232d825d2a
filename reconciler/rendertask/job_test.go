package rendertask

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// TestJobHoldsOnlyWhatTheRenderNeeds: a render Job's pod mounts its config Secret,
// the publish Registry's Secret (only its credential keys) and a bounded writable
// directory, gets no API token, runs as a non-root user with a read-only root
// filesystem and no capability, within the render's deadline plus its start and
// the render's memory plus the process around it; deleting its task collects it.
func TestJobHoldsOnlyWhatTheRenderNeeds(t *testing.T) {
	g := NewWithT(t)
	task := &cairnv1.RenderTask{ObjectMeta: metav1.ObjectMeta{Name: "web-0123456789abcdef", Namespace: "cairn-system", UID: "uid-1"}}
	job := Job(task, "render-web-0123456789abcdef", Mounts{PublishSecret: "pub-creds", PublishCA: "pub-ca"},
		JobOptions{Image: "registry.example.com/cairn@sha256:abc", Command: []string{"/cairn"}, Args: []string{"render-task"}}, 30*time.Second, 512<<20)

	g.Expect(job.Name).To(Equal("render-" + task.Name))
	g.Expect(job.OwnerReferences).To(ConsistOf(HaveField("UID", task.UID)))
	g.Expect(*job.Spec.ActiveDeadlineSeconds).To(BeEquivalentTo(90))
	g.Expect(*job.Spec.TTLSecondsAfterFinished).To(BeEquivalentTo(3600))
	pod := job.Spec.Template.Spec
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse(), "no API token")
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.SecurityContext.RunAsUser).To(BeEquivalentTo(65532))
	c := pod.Containers[0]
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(c.Resources.Limits.Memory().Value()).To(BeEquivalentTo(512<<20 + podOverhead))
	g.Expect(c.Args).To(Equal([]string{"render-task", "--registry-ca", "/etc/cairn/ca/publish-ca/ca.crt",
		"--registry-config", publishDir, "--module-registry-config", modulesDir, "--tmp-dir", tmpDir}))
	var secrets []string
	for _, v := range pod.Volumes {
		switch {
		case v.Secret != nil:
			secrets = append(secrets, v.Secret.SecretName)
			if v.Name == "publish" {
				var keys []string
				for _, it := range v.Secret.Items {
					keys = append(keys, it.Key)
				}
				g.Expect(keys).To(ConsistOf("username", "password", ".dockerconfigjson", ".dockercfg"), "only the credential keys")
				g.Expect(*v.Secret.Optional).To(BeTrue(), "a key the Secret lacks is left out")
			}
		case v.EmptyDir != nil:
			g.Expect(v.EmptyDir.SizeLimit.Value()).To(BeEquivalentTo(tmpBytes))
		}
	}
	g.Expect(secrets).To(ConsistOf("render-web-0123456789abcdef", "pub-creds"), "no other Secret")
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
		if m.MountPath != tmpDir {
			g.Expect(m.ReadOnly).To(BeTrue(), m.MountPath)
		}
	}
	g.Expect(mounts).To(ConsistOf(specDir, tmpDir, publishDir, caDir+"/publish-ca"))

	// --renderer-ca-configmap: every render pod trusts its ca.crt, beside each
	// Registry's CA; --renderer-failed-job-ttl: a failed Job stays that long.
	job = Job(task, "render-web-0123456789abcdef", Mounts{PublishSecret: "pub-creds"},
		JobOptions{Image: "i", CAConfigMap: "corporate-ca", FailedJobTTL: 10 * time.Minute}, 30*time.Second, 512<<20)
	g.Expect(*job.Spec.TTLSecondsAfterFinished).To(BeEquivalentTo(600))
	pod = job.Spec.Template.Spec
	g.Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "renderer-ca"), HaveField("ConfigMap.Name", "corporate-ca"))))
	g.Expect(pod.Containers[0].Args).To(ContainElements("--ca-bundle", caDir+"/renderer-ca/ca.crt"))
}

// TestNameIsADNSLabel: a task's name is a DNS label of at most 47 characters
// (its Job's pods add a suffix), the same for the same input and another for
// another input or instance.
func TestNameIsADNSLabel(t *testing.T) {
	g := NewWithT(t)
	long := "a-very-long-instance-name-that-goes-on-and-on-beyond-any-reasonable-length"
	n := Name("team-a", long, "hmac-sha256:1")
	g.Expect(len(n)).To(BeNumerically("<=", 47))
	g.Expect(n).To(MatchRegexp(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`))
	g.Expect(Name("team-a", long, "hmac-sha256:1")).To(Equal(n))
	g.Expect(Name("team-a", long, "hmac-sha256:2")).NotTo(Equal(n))
	g.Expect(Name("team-b", long, "hmac-sha256:1")).NotTo(Equal(n))
}

package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/cairn/test/harness"
)

// TestPodRunnerRunsJobsLocally: a Job whose pod is labelled harness.RunPodLabel
// runs its command as a local process with its Secret volume and environment,
// and the Job controller completes it on the exit code and the termination
// message the stand-in kubelet reports; a failing command fails the Job with its
// message; a Job deleted while its command runs has the command killed.
func TestPodRunnerRunsJobsLocally(t *testing.T) {
	g := NewWithT(t)
	c := harness.ForTest(t)
	client := clientFor(t, c.RESTConfig)
	ns := c.Namespace(t)
	ctx := context.Background()
	runner, err := c.RunPods(ctx, ns, map[string]string{"/task": "/bin/sh"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(runner.Stop)

	_, err = client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "input"},
		Data: map[string][]byte{"value": []byte("from-the-secret")}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	job := func(name, script string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{harness.RunPodLabel: name}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Volumes: []corev1.Volume{{Name: "input", VolumeSource: corev1.VolumeSource{
							Secret: &corev1.SecretVolumeSource{SecretName: "input"}}}},
						Containers: []corev1.Container{{Name: "run", Image: "example.invalid/run:1",
							Command:      []string{"/task", "-c"},
							Args:         []string{script},
							Env:          []corev1.EnvVar{{Name: "GREETING", Value: "hello"}},
							VolumeMounts: []corev1.VolumeMount{{Name: "input", MountPath: "/etc/input", ReadOnly: true}},
						}},
					},
				},
			},
		}
	}
	// ended waits until the Job name has completed or failed, and says which.
	ended := func(name string) batchv1.JobConditionType {
		var typ batchv1.JobConditionType
		g.Eventually(func(g Gomega) {
			got, err := client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range got.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					typ = c.Type
				}
			}
			g.Expect(typ).NotTo(BeEmpty())
		}).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		return typ
	}
	message := func(name string) string {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: harness.RunPodLabel + "=" + name})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(1))
		st := pods.Items[0].Status.ContainerStatuses
		g.Expect(st).To(HaveLen(1))
		g.Expect(st[0].State.Terminated).NotTo(BeNil())
		return st[0].State.Terminated.Message
	}

	_, err = client.BatchV1().Jobs(ns).Create(ctx, job("ok",
		`printf '%s %s' "$GREETING" "$(cat "$CAIRN_TASK_ROOT/etc/input/value")" > "$CAIRN_TASK_ROOT/dev/termination-log"`), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ended("ok")).To(Equal(batchv1.JobComplete), message("ok"))
	g.Expect(message("ok")).To(Equal("hello from-the-secret"))

	_, err = client.BatchV1().Jobs(ns).Create(ctx, job("fails",
		`echo 'main.cue:3: conflicting values' > "$CAIRN_TASK_ROOT/dev/termination-log"; exit 3`), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ended("fails")).To(Equal(batchv1.JobFailed), message("fails"))
	g.Expect(message("fails")).To(Equal("main.cue:3: conflicting values\n"))

	pidFile := filepath.Join(t.TempDir(), "pid")
	slow := job("deleted", `echo $$ > "$PID_FILE"; exec sleep 300`)
	slow.Spec.Template.Spec.Containers[0].Env = append(slow.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "PID_FILE", Value: pidFile})
	_, err = client.BatchV1().Jobs(ns).Create(ctx, slow, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var pid int
	g.Eventually(func(g Gomega) {
		b, err := os.ReadFile(pidFile)
		g.Expect(err).NotTo(HaveOccurred())
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(syscall.Kill(pid, 0)).To(Succeed(), "running")
	g.Expect(client.BatchV1().Jobs(ns).Delete(ctx, "deleted", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})).To(Succeed())
	g.Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).
		Should(MatchError(syscall.ESRCH), "killed with its pod")
}

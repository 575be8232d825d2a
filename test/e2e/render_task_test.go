package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/sign"
	"cairn.dev/cairn/test/harness"
)

// renderTaskModule renders a ConfigMap and a Secret; broken fails at line 4.
const (
	renderTaskModule = `package app

instance: {name: string, namespace: string}
values: {}
objects: {
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: instance.name}
	secret: {apiVersion: "v1", kind: "Secret", metadata: name: instance.name, stringData: token: "Render-Job-Pa55-T4q"}
}
`
	brokenTaskModule = `package app

instance: {name: string, namespace: string}
objects: x: 1 & 2
`
)

// TestARenderJobRendersAsInProcess: `cairn render-task` in a Kubernetes Job (its
// pod run by the harness's stand-in kubelet, the Job completed or failed by the
// Job controller) pulls its source from a registry that asks for credentials,
// with those of the docker config its pod mounts, and pushes the render: the
// controller's side fetches it by the digest in the termination message and gets
// the in-process render of the same input, to the digest, with the Secret's data
// never in the registry in the clear. A module that does not render fails the Job
// with the error, file and line, in the termination message. The pod mounts no
// API token.
func TestARenderJobRendersAsInProcess(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bin := buildCairn(t)
	e.g.Expect(e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})).To(Succeed())
	e.deleteNamespacesAtEnd(e.ns)
	runner, err := e.cluster.RunPods(ctx, e.ns, map[string]string{"/cairn": bin})
	e.g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(runner.Stop)
	reg := startRegistry(t, true, false)
	creds := &sign.Credentials{Username: testRegistryUser, Password: testRegistryPassword}
	oci, err := sign.NewClient(sign.Endpoint{Host: reg.Host, PlainHTTP: true, Credentials: creds})
	e.g.Expect(err).NotTo(HaveOccurred())
	dockerConfig, err := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{
		"username": testRegistryUser, "password": testRegistryPassword}}})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "publish-registry", Namespace: e.ns},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig}})).To(Succeed())

	renderer := render.NewRenderer()
	t.Cleanup(func() { _ = renderer.Close() })
	for _, tc := range []struct {
		name, module string
		fails        string
	}{
		{name: "web", module: renderTaskModule},
		{name: "broken", module: brokenTaskModule, fails: "main.cue:4"},
	} {
		src := t.TempDir()
		e.g.Expect(os.MkdirAll(filepath.Join(src, "modules", tc.name), 0o755)).To(Succeed())
		e.g.Expect(os.WriteFile(filepath.Join(src, "modules", tc.name, "main.cue"), []byte(tc.module), 0o644)).To(Succeed())
		tarball, err := rendertask.PackSource(os.DirFS(src), []string{"modules/" + tc.name})
		e.g.Expect(err).NotTo(HaveOccurred())
		sourceDigest, err := rendertask.PushSource(ctx, oci, "platform/"+tc.name+"/source", tarball)
		e.g.Expect(err).NotTo(HaveOccurred())
		key, err := rendertask.NewKey()
		e.g.Expect(err).NotTo(HaveOccurred())
		spec := &rendertask.Spec{Namespace: e.ns, Name: tc.name, InputDigest: "sha256:" + strings.Repeat("a", 64), Revision: "abc",
			Registry: rendertask.Endpoint{Host: reg.Host, PlainHTTP: true}, Source: "platform/" + tc.name + "/source",
			SourceDigest: sourceDigest.String(), Result: "platform/" + tc.name + "/render",
			Request: rendertask.Request{LocalPath: "modules/" + tc.name}, PublicKey: rendertask.EncodeKey(key.Public)}
		b, err := json.Marshal(spec)
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Expect(e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "render-" + tc.name, Namespace: e.ns},
			Data: map[string][]byte{"spec.json": b}})).To(Succeed())
		e.g.Expect(e.c.Create(ctx, renderJob(e.ns, tc.name))).To(Succeed())

		pod := awaitRenderPod(e, tc.name)
		st := pod.Status.ContainerStatuses[0].State.Terminated
		if tc.fails != "" {
			e.g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed))
			e.g.Expect(st.Message).To(HavePrefix("error: "))
			e.g.Expect(st.Message).To(ContainSubstring(tc.fails))
			e.g.Eventually(func() bool { return jobEnded(e, tc.name, batchv1.JobFailed) }).WithTimeout(60 * time.Second).Should(BeTrue())
			continue
		}
		e.g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), st.Message)
		e.g.Eventually(func() bool { return jobEnded(e, tc.name, batchv1.JobComplete) }).WithTimeout(60 * time.Second).Should(BeTrue())
		dgst := digest.Digest(strings.TrimPrefix(st.Message, "digest: "))
		files, _, err := oci.PullArtifact(ctx, spec.Result, dgst)
		e.g.Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			e.g.Expect(string(f.Data)).NotTo(ContainSubstring("Render-Job-Pa55-T4q"), "sealed in the registry")
		}
		got, err := rendertask.Fetch(ctx, oci, spec, dgst, key)
		e.g.Expect(err).NotTo(HaveOccurred())
		want, err := renderer.Render(ctx, render.Request{Name: tc.name, Namespace: e.ns, Source: os.DirFS(src), LocalPath: "modules/" + tc.name})
		e.g.Expect(err).NotTo(HaveOccurred())
		e.g.Expect(got.Digest).To(Equal(want.Digest), "the same render as in-process")
		e.g.Expect(got.Objects).To(Equal(want.Objects))
	}
}

// renderJob is a render Job as docs/render-jobs.md describes its pod: the task's
// config Secret and the publish Registry's docker config mounted, no API token,
// non-root, a read-only root filesystem, no capability, a deadline.
func renderJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "render-" + name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](120),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{harness.RunPodLabel: name}},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					Volumes: []corev1.Volume{
						{Name: "task", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "render-" + name}}},
						{Name: "publish", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "publish-registry"}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					Containers: []corev1.Container{{
						Name: "render", Image: "example.invalid/cairn:test", Command: []string{"/cairn", "render-task"}, Args: []string{"--tmp-dir", "/tmp"},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "task", MountPath: "/etc/cairn/task", ReadOnly: true},
							{Name: "publish", MountPath: "/etc/cairn/registries/publish", ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
						},
						SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

// awaitRenderPod waits until the pod of the render Job name has ended and returns it.
func awaitRenderPod(e *env, name string) *corev1.Pod {
	var pod corev1.Pod
	e.g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(e.c.List(context.Background(), &pods, client.InNamespace(e.ns), client.MatchingLabels{harness.RunPodLabel: name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(pod.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
	}).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return &pod
}

func jobEnded(e *env, name string, typ batchv1.JobConditionType) bool {
	var job batchv1.Job
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "render-" + name}, &job); err != nil {
		return false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestInstancesRenderInJobs: with render.mode Job, the engine renders each instance
// in a render Job of cairn's namespace (a RenderTask, its config Secret and its Job,
// the pod run by the stand-in kubelet) and applies what the Job pushed: the
// instance is Ready, its render published and signed by the engine, the task
// records the artifact it pushed, and its Job and config Secret are gone. The same
// input rendered in-process gives the same render digest. An instance whose module
// does not render fails with the render's file and line, its objects untouched,
// and its task says the Job failed.
func TestInstancesRenderInJobs(t *testing.T) {
	e := newEnv(t)
	e.withEngine(render.RendererOptions{}, func(o *reconciler.Options) {
		o.RenderJob = rendertask.JobOptions{Image: "example.invalid/cairn:test", Command: []string{"/cairn"}, Args: []string{"render-task"}}
	})
	e.ensureCairnNamespace()
	runner, err := e.cluster.RunPods(e.ctx, reconciler.DefaultNamespace, map[string]string{"/cairn": buildCairn(t)})
	e.g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(runner.Stop)
	pub := startRegistry(t, true, false)
	keys := newKeyPair(t)
	suffix := e.ns
	e.putCairnSecret("pub-creds-"+suffix, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	files := appRepo("  render:\n    mode: Job\n    publish: {registry: rendered, repository: rendered/cluster}\n",
		inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a")})
	files["registries.yaml"] = registryYAML("rendered", pub.Host, true,
		"  secretRef: {name: pub-creds-"+suffix+"}\n  signing:\n    keySecretRef: {name: signing-"+suffix+"}\n")
	repo := newGitRepo(t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-a")).NotTo(BeNil())
	mi := e.instanceCR(e.ns, "web")
	e.g.Expect(mi.Status.Published).NotTo(BeNil())
	jobDigest := mi.Status.RenderDigest

	var tasks cairnv1.RenderTaskList
	e.g.Expect(e.c.List(e.ctx, &tasks, client.InNamespace(reconciler.DefaultNamespace),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "web")})).To(Succeed())
	e.g.Expect(tasks.Items).To(HaveLen(1))
	task := tasks.Items[0]
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), &task) })
	e.g.Expect(task.Status.ArtifactDigest).To(HavePrefix("sha256:"))
	edited := task.DeepCopy()
	edited.Spec.SourceArtifact = pub.Host + "/elsewhere@sha256:" + strings.Repeat("b", 64)
	e.g.Expect(e.c.Update(e.ctx, edited)).To(MatchError(ContainSubstring("immutable")), "a task's input never changes")
	e.g.Expect(isTrueCondition(&task, cairnv1.JobSucceededCondition)).To(BeTrue(), "%+v", task.Status)
	e.g.Eventually(func() bool {
		return e.get("batch/v1", "Job", reconciler.DefaultNamespace, task.Name) == nil &&
			e.get("v1", "Secret", reconciler.DefaultNamespace, "render-"+task.Name) == nil
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the Job and its config Secret are removed once it succeeded")

	// The same input in-process: the same render.
	repo.commit("render in process", map[string]string{"platform.yaml": platformYAML(
		"  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n")})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.instanceCR(e.ns, "web").Status.RenderDigest).To(Equal(jobDigest), "a Job render and an in-process render of the same input")

	// Back to Jobs, with a module that does not render.
	repo.commit("broken", map[string]string{
		"platform.yaml":       platformYAML("  render:\n    mode: Job\n    publish: {registry: rendered, repository: rendered/cluster}\n"),
		"modules/app/app.cue": appModule + "\nobjects: broken: 1 & 2\n",
	})
	res = e.sync(repo)
	got := result(res, e.ns, "web")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%+v", got)
	e.g.Expect(got.Reason).To(Equal(cairnv1.ReasonRenderFailed))
	e.g.Expect(got.Message).To(ContainSubstring("app.cue:"))
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-a")).NotTo(BeNil(), "a failed render changes nothing")
	e.g.Expect(e.c.List(e.ctx, &tasks, client.InNamespace(reconciler.DefaultNamespace),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "web")})).To(Succeed())
	failed := 0
	for _, tk := range tasks.Items {
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), &tk) })
		if isTrueCondition(&tk, cairnv1.JobFailedCondition) {
			failed++
			e.g.Expect(tk.Status.Message).To(ContainSubstring("app.cue:"))
		}
	}
	e.g.Expect(failed).To(Equal(1), "the failed task says so")
}

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/rendertask"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
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
		e.g.Expect(e.c.Create(ctx, renderJob(e, tc.name))).To(Succeed())

		pod := awaitRenderPod(e, tc.name)
		st := pod.Status.ContainerStatuses[0].State.Terminated
		if tc.fails != "" {
			e.g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed))
			e.g.Expect(st.Message).To(HavePrefix("error: "))
			e.g.Expect(st.Message).To(ContainSubstring(tc.fails))
			e.g.Eventually(func() bool { return jobEnded(e, rendertask.JobName(tc.name), batchv1.JobFailed) }).WithTimeout(60 * time.Second).Should(BeTrue())
			continue
		}
		e.g.Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), st.Message)
		e.g.Eventually(func() bool { return jobEnded(e, rendertask.JobName(tc.name), batchv1.JobComplete) }).WithTimeout(60 * time.Second).Should(BeTrue())
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

// renderJob is the render Job the controller makes (rendertask.Job) for a task of
// its own, in ns, with the publish Registry's Secret publish-registry.
func renderJob(e *env, name string) *batchv1.Job {
	task := &cairnv1.RenderTask{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: cairnv1.RenderTaskSpec{Instance: cairnv1.InstanceReference{Namespace: e.ns, Name: name}, InputDigest: "hmac-sha256:test",
			SourceArtifact: "example.invalid/source@sha256:" + strings.Repeat("0", 64)}}
	e.g.Expect(e.c.Create(context.Background(), task)).To(Succeed())
	return rendertask.Job(task, "render-"+name, rendertask.Mounts{PublishSecret: "publish-registry"},
		rendertask.JobOptions{Image: "example.invalid/cairn:test", Command: []string{"/cairn"}, Args: []string{"render-task"}}, 30*time.Second, 256<<20)
}

// awaitRenderPod waits until the pod of the render Job name has ended and returns it.
func awaitRenderPod(e *env, name string) *corev1.Pod {
	var pod corev1.Pod
	e.g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(e.c.List(context.Background(), &pods, client.InNamespace(e.ns), client.MatchingLabels{harness.RunPodLabel: name})).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(*p.Spec.AutomountServiceAccountToken).To(BeFalse(), "no API token")
			g.Expect(p.Spec.Volumes).NotTo(ContainElement(HaveField("Projected", Not(BeNil()))), "no token volume")
		}
		g.Expect(pods.Items).To(HaveLen(1))
		pod = pods.Items[0]
		g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(pod.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
	}).WithTimeout(120 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return &pod
}

func jobEnded(e *env, name string, typ batchv1.JobConditionType) bool {
	var job batchv1.Job
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &job); err != nil {
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
	_, pub, repo := renderJobsEnv(e)
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
		return e.get("batch/v1", "Job", reconciler.DefaultNamespace, rendertask.JobName(task.Name)) == nil &&
			e.get("v1", "Secret", reconciler.DefaultNamespace, "render-"+task.Name) == nil
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the Job and its config Secret are removed once it succeeded")

	// One change rendered in a Job, then the same input in-process: the same render.
	repo.commit("b", map[string]string{"instances/web.yaml": inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a", "b")}.yaml()})
	began := time.Now()
	res = e.sync(repo)
	inJob := time.Since(began)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	jobDigest = e.instanceCR(e.ns, "web").Status.RenderDigest
	repo.commit("render in process", map[string]string{"platform.yaml": platformYAML(
		"  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n")})
	began = time.Now()
	res = e.sync(repo)
	t.Logf("a sync of one instance rendered in a Job took %v, in-process %v", inJob.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
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
	var failed []string
	for _, tk := range tasks.Items {
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), &tk) })
		if isTrueCondition(&tk, cairnv1.JobFailedCondition) {
			failed = append(failed, tk.Name)
			e.g.Expect(tk.Status.Message).To(ContainSubstring("app.cue:"))
		}
	}
	e.g.Expect(failed).To(HaveLen(1), "the failed task says so")

	// A failed task's Job and config Secret stay for failedJobTTL, then go: the
	// Job by its ttlSecondsAfterFinished, the Secret at the next render Job's sweep.
	config := e.get("v1", "Secret", reconciler.DefaultNamespace, "render-"+failed[0])
	e.g.Expect(config).NotTo(BeNil(), "kept for whoever looks into the failure")
	e.g.Expect(config.GetAnnotations()).To(HaveKey(rendertask.ExpiresAnnotation))
	e.g.Expect(e.get("batch/v1", "Job", reconciler.DefaultNamespace, rendertask.JobName(failed[0]))).NotTo(BeNil(), "kept for its logs")
	e.g.Eventually(func() bool {
		return e.get("batch/v1", "Job", reconciler.DefaultNamespace, rendertask.JobName(failed[0])) == nil
	}).
		WithTimeout(2*time.Minute).Should(BeTrue(), "the failed Job goes after its TTL")
	repo.commit("fixed", map[string]string{"modules/app/app.cue": appModule})
	e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	e.g.Eventually(func() bool {
		e.sync(repo) // a sync sweeps (at most once per TTL here)
		return e.get("v1", "Secret", reconciler.DefaultNamespace, "render-"+failed[0]) == nil
	}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(BeTrue(), "the failed task's config Secret went after its TTL")
}

// TestRenderJobFaults: what happens to a render Job is never lost and never
// applies half a render. A Job deleted while it runs is made again and the
// instance goes Ready; an engine stopped while its Job runs leaves the task, and
// the next engine's sync takes the same task (no second one) and goes Ready; a
// publish registry that goes down while the Job runs fails the instance as
// transient, nothing applied, and the sync after it is back applies the change.
func TestRenderJobFaults(t *testing.T) {
	e := newEnv(t)
	runner, pub, repo := renderJobsEnv(e)
	instance := func(configs map[string]string) string {
		return inst{name: "web", ns: e.ns, replicas: 1, configs: configs}.yaml()
	}
	tasks := func() []cairnv1.RenderTask {
		var list cairnv1.RenderTaskList
		e.g.Expect(e.c.List(e.ctx, &list, client.InNamespace(reconciler.DefaultNamespace),
			client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "web")})).To(Succeed())
		for i := range list.Items {
			t.Cleanup(func() { _ = e.c.Delete(context.Background(), &list.Items[i]) })
		}
		return list.Items
	}
	// running waits until a render pod runs and returns its Job's name.
	running := func() string {
		var name string
		e.g.Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(e.c.List(e.ctx, &pods, client.InNamespace(reconciler.DefaultNamespace), client.HasLabels{rendertask.PodLabel})).To(Succeed())
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					name = p.Labels[rendertask.PodLabel]
				}
			}
			g.Expect(name).NotTo(BeEmpty())
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		return name
	}
	syncAsync := func(ctx context.Context) <-chan *reconciler.SyncResult {
		done := make(chan *reconciler.SyncResult, 1)
		rev, err := e.revision(repo)
		e.g.Expect(err).NotTo(HaveOccurred())
		go func() {
			res, _ := e.engine.Sync(ctx, rev)
			done <- res
		}()
		return done
	}

	// A Job deleted while it runs.
	runner.SetDelay(3 * time.Second)
	done := syncAsync(e.ctx)
	job := running()
	e.g.Expect(e.c.Delete(e.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: rendertask.JobName(job)}},
		client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	res := <-done
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-a")).NotTo(BeNil())
	e.g.Expect(tasks()).To(HaveLen(1), "the same task, its Job made again")

	// An engine stopped while its Job runs; the next one takes the same task.
	repo.commit("b", map[string]string{"instances/web.yaml": instance(configs("a", "b"))})
	ctx, cancel := context.WithCancel(e.ctx)
	done = syncAsync(ctx)
	running()
	cancel()
	<-done
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-b")).To(BeNil(), "nothing applied by the stopped engine")
	e.withEngine(render.RendererOptions{}, withRenderJobs)
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "web").Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-b")).NotTo(BeNil())
	e.g.Expect(tasks()).To(HaveLen(2), "the restarted engine took the task the stopped one made")

	// The publish registry down while the Job runs.
	repo.commit("c", map[string]string{"instances/web.yaml": instance(configs("a", "b", "c"))})
	done = syncAsync(e.ctx)
	running()
	pub.Stop()
	res = <-done
	got := result(res, e.ns, "web")
	e.g.Expect(got.Action).To(BeEquivalentTo("Failed"), "%+v", got)
	e.g.Expect(got.Retry).To(Equal(outcome.Transient), got.Message)
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-c")).To(BeNil(), "nothing applied")
	runner.SetDelay(0)
	restartRegistry(t, pub)
	e.g.Eventually(func() bool { return result(e.sync(repo), e.ns, "web").Ready }, time.Minute, 2*time.Second).Should(BeTrue())
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-c")).NotTo(BeNil())
}

// failedJobTTL is how long a failed render Job and its config Secret stay in the
// tests (an hour by default).
const failedJobTTL = 4 * time.Second

// withRenderJobs runs render Jobs with the image the stand-in kubelet knows.
func withRenderJobs(o *reconciler.Options) {
	o.RenderJob = rendertask.JobOptions{Image: "example.invalid/cairn:test", Command: []string{"/cairn"}, Args: []string{"render-task"},
		FailedJobTTL: failedJobTTL}
}

// renderJobsEnv readies e for render Jobs: an engine that runs them, a stand-in
// kubelet for their pods in cairn's namespace, a publish registry with basic auth
// and a signing key, and a repository whose Platform renders in Jobs with one
// instance, web, of the app module.
func renderJobsEnv(e *env) (*harness.PodRunner, *testRegistry, *gitRepo) {
	e.withEngine(render.RendererOptions{}, withRenderJobs)
	e.ensureCairnNamespace()
	runner, err := e.cluster.RunPods(e.ctx, reconciler.DefaultNamespace, map[string]string{"/cairn": buildCairn(e.t)})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(runner.Stop)
	pub := startRegistry(e.t, true, false)
	keys := newKeyPair(e.t)
	suffix := e.ns
	e.putCairnSecret("pub-creds-"+suffix, corev1.SecretTypeBasicAuth, basicAuthData())
	e.putCairnSecret("signing-"+suffix, corev1.SecretTypeOpaque, map[string][]byte{
		"cosign.key": keys.private, "cosign.password": []byte(testKeyPassword)})
	files := appRepo("  render:\n    mode: Job\n    publish: {registry: rendered, repository: rendered/cluster}\n",
		inst{name: "web", ns: e.ns, replicas: 1, configs: configs("a")})
	files["registries.yaml"] = registryYAML("rendered", pub.Host, true,
		"  secretRef: {name: pub-creds-"+suffix+"}\n  signing:\n    keySecretRef: {name: signing-"+suffix+"}\n")
	return runner, pub, newGitRepo(e.t, files)
}

// TestEveryModuleKindRendersInAJob: with render.mode Job, a chart and a Timoni
// module of a registry that asks for credentials, a CUE module of that registry
// with a catalog, and a local module render in Jobs and go Ready, each with its
// task's artifact; a chart and a Timoni module reach the pod in the source the
// controller pushed (pulled and verified by it), so their Jobs mount no module
// registry credential, while the CUE module's Job mounts that registry's Secret
// (and only the module renders that read the registry do). Rendered in-process
// afterwards, every instance has the same render digest.
func TestEveryModuleKindRendersInAJob(t *testing.T) {
	e := newEnv(t)
	_, pub, repo := renderJobsEnv(e)
	mods := startRegistry(t, true, false)
	rc := registryClient(t, mods, true)
	mr := render.ModuleRegistry{Host: mods.Host, PlainHTTP: true, Username: testRegistryUser, Password: testRegistryPassword}
	for _, m := range []struct{ dir, version string }{
		{"../../examples/registry/catalog", "v0.1.0"}, {"../../examples/registry/redis", "v0.1.0"},
	} {
		_, err := render.PushModule(e.ctx, m.dir, mr, m.version)
		e.g.Expect(err).NotTo(HaveOccurred())
	}
	pushChart(t, e.ctx, rc, "charts/hello", chartArchive(t, "hello", "0.1.0", "from a Job"), nil)
	_, err := harness.PushTimoniArtifact(e.ctx, mods.Host, "modules/webapp", "1.0.0",
		harness.TimoniArtifact{Layers: timoniLayers(copyDir(t, timoniModuleDir, "")), Username: testRegistryUser, Password: testRegistryPassword})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.putCairnSecret("mod-creds-"+e.ns, corev1.SecretTypeOpaque, basicAuthData())

	platform := func(render string) string {
		return platformYAML("  moduleRegistry: modules\n  catalogs:\n    - {module: cairn.dev/examples/catalog@v0, version: v0.1.0}\n" + render)
	}
	files := map[string]string{
		"platform.yaml": platform("  render:\n    mode: Job\n    publish: {registry: rendered, repository: rendered/cluster}\n"),
		"registries.yaml": registryYAML("rendered", pub.Host, true, "  secretRef: {name: pub-creds-"+e.ns+"}\n"+
			"  signing:\n    keySecretRef: {name: signing-"+e.ns+"}\n") + "---\n" +
			registryYAML("modules", mods.Host, true, "  secretRef: {name: mod-creds-"+e.ns+"}\n"),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, "oci://"+mods.Host+"/charts/hello", "0.1.0", ""),
		"instances/oci.yaml": timoniInstance("oci", e.ns, "url: 'oci://"+mods.Host+"/modules/webapp', version: '1.0.0'",
			`{replicas: 2, env: {COLOR: teal}}`),
		"instances/cache.yaml": "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: cache\n  namespace: " + e.ns +
			"\nspec:\n  module:\n    cue: {path: cairn.dev/examples/redis@v0, version: v0.1.0}\n  timeout: 1m\n",
	}
	repo.commit("every kind", files)

	// Which Secrets each render pod mounts, seen as the pods run.
	mounted := map[string][]string{}
	var mu sync.Mutex
	watchCtx, stopWatch := context.WithCancel(e.ctx)
	defer stopWatch()
	go func() {
		for watchCtx.Err() == nil {
			var pods corev1.PodList
			if e.c.List(watchCtx, &pods, client.InNamespace(reconciler.DefaultNamespace), client.HasLabels{rendertask.PodLabel}) == nil {
				mu.Lock()
				for _, p := range pods.Items {
					var secrets []string
					for _, v := range p.Spec.Volumes {
						if v.Secret != nil {
							secrets = append(secrets, v.Secret.SecretName)
						}
					}
					mounted[p.Labels[rendertask.PodLabel]] = secrets
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	names := []string{"web", "hello", "oci", "cache"}
	res := e.sync(repo)
	jobDigests := map[string]string{}
	for _, name := range names {
		e.g.Expect(result(res, e.ns, name).Ready).To(BeTrue(), "%s: %+v", name, result(res, e.ns, name))
		mi := e.instanceCR(e.ns, name)
		jobDigests[name] = mi.Status.RenderDigest
		var tasks cairnv1.RenderTaskList
		e.g.Expect(e.c.List(e.ctx, &tasks, client.InNamespace(reconciler.DefaultNamespace),
			client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, name)})).To(Succeed())
		e.g.Expect(tasks.Items).NotTo(BeEmpty(), "%s rendered in a Job", name)
		for i := range tasks.Items {
			t.Cleanup(func() { _ = e.c.Delete(context.Background(), &tasks.Items[i]) })
			e.g.Expect(tasks.Items[i].Status.ArtifactDigest).To(HavePrefix("sha256:"), name)
			mu.Lock()
			secrets, seen := mounted[tasks.Items[i].Name]
			mu.Unlock()
			if !seen {
				continue // its pod came and went between two looks
			}
			if name == "hello" || name == "oci" {
				e.g.Expect(secrets).NotTo(ContainElement("mod-creds-"+e.ns), "%s: its module travels in the source", name)
			} else {
				e.g.Expect(secrets).To(ContainElement("mod-creds-"+e.ns), "%s: it reads the module registry", name)
			}
		}
	}
	stopWatch()
	mu.Lock()
	e.g.Expect(mounted).NotTo(BeEmpty(), "the render pods were seen")
	mu.Unlock()
	e.g.Expect(e.configMap(e.ns, "oci").Data).To(HaveKeyWithValue("COLOR", "teal"))

	repo.commit("in process", map[string]string{"platform.yaml": platform(
		"  render:\n    publish: {registry: rendered, repository: rendered/cluster}\n")})
	res = e.sync(repo)
	for _, name := range names {
		e.g.Expect(result(res, e.ns, name).Ready).To(BeTrue(), "%s: %+v", name, result(res, e.ns, name))
		e.g.Expect(e.instanceCR(e.ns, name).Status.RenderDigest).To(Equal(jobDigests[name]), "%s: a Job render and an in-process one", name)
	}

	// With verification on, a Job's pod could not verify the CUE modules it pulls
	// (in-process, each is verified by digest as it is fetched): refused, not
	// rendered unverified; the chart, verified by the controller, still renders.
	cache := "apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: cache\n  namespace: " + e.ns +
		"\nspec:\n  module:\n    cue: {path: cairn.dev/examples/redis@v0, version: v0.1.0}\n  timeout: 1m\n  values: {replicas: 2}\n"
	repo.commit("verified, in Jobs", map[string]string{"instances/cache.yaml": cache, "platform.yaml": platform(
		"  verify: {mode: Warn}\n  render:\n    mode: Job\n    publish: {registry: rendered, repository: rendered/cluster}\n"),
		"instances/hello.yaml": chartInstanceYAML("hello", e.ns, "oci://"+mods.Host+"/charts/hello", "0.1.0", "  values: {greeting: again}\n")})
	res = e.sync(repo)
	got := result(res, e.ns, "cache")
	e.g.Expect(got.Reason).To(Equal(declarations.ReasonNotAvailable), "%+v", got)
	e.g.Expect(got.Message).To(ContainSubstring("render this instance InProcess"))
	e.g.Expect(result(res, e.ns, "hello").Ready).To(BeTrue(), "%+v", result(res, e.ns, "hello"))
}

// TestControllerRestartedWhileARenderJobRuns: `cairn controller` renders in Jobs;
// SIGKILLed while its render Job runs, the controller started again finds the
// same RenderTask by name, waits for the Job that was running (no second Job, no
// second pod) and applies its render.
func TestControllerRestartedWhileARenderJobRuns(t *testing.T) {
	e := newEnv(t)
	runner, _, repo := renderJobsEnv(e)
	bin := buildCairn(t)
	args := append(e.controllerArgs(t, repo, freeLoopbackAddr(t), "0"), "--renderer-image", "example.invalid/cairn:test",
		"--renderer-command", "/cairn", "--renderer-failed-job-ttl", failedJobTTL.String())
	runner.SetDelay(6 * time.Second)
	first := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-0"}, args...)
	var task string
	e.g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(e.c.List(e.ctx, &pods, client.InNamespace(reconciler.DefaultNamespace), client.HasLabels{rendertask.PodLabel})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
		task = pods.Items[0].Labels[rendertask.PodLabel]
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(Succeed(), first.String)
	e.g.Expect(first.cmd.Process.Kill()).To(Succeed())
	<-first.done
	e.g.Expect(e.get("v1", "ConfigMap", e.ns, "web-a")).To(BeNil(), "nothing applied before the render came back")

	second := startCairnProcessWithEnv(t, bin, []string{"POD_NAME=cairn-1"}, args...)
	e.g.Eventually(func() bool { return e.get("v1", "ConfigMap", e.ns, "web-a") != nil }, 2*time.Minute, 200*time.Millisecond).
		Should(BeTrue(), second.String)
	var tasks cairnv1.RenderTaskList
	e.g.Expect(e.c.List(e.ctx, &tasks, client.InNamespace(reconciler.DefaultNamespace),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "web")})).To(Succeed())
	e.g.Expect(tasks.Items).To(HaveLen(1))
	t.Cleanup(func() { _ = e.c.Delete(context.Background(), &tasks.Items[0]) })
	e.g.Expect(tasks.Items[0].Name).To(Equal(task), "the task the killed controller made")
	e.g.Expect(runner.Started()).To(Equal(1), "its Job's one pod, not a second")
	e.g.Eventually(func() bool { return conditions.IsTrue(e.instance(e.ns, "web"), "Ready") }, time.Minute, 200*time.Millisecond).
		Should(BeTrue(), second.String)
}

// TestRenderJobArtifactsAreCollected: five changes of an instance rendered in
// Jobs leave its newest three RenderTasks, and in the publish registry only the
// results and sources those tasks name: the older results are deleted.
func TestRenderJobArtifactsAreCollected(t *testing.T) {
	e := newEnv(t)
	_, pub, repo := renderJobsEnv(e)
	rc := registryClient(t, pub, true)
	keys := []string{"a"}
	for i := range 5 {
		if i > 0 {
			keys = append(keys, string(rune('a'+i)))
			repo.commit("config "+keys[i], map[string]string{"instances/web.yaml": inst{name: "web", ns: e.ns, replicas: 1, configs: configs(keys...)}.yaml()})
		}
		e.g.Expect(result(e.sync(repo), e.ns, "web").Ready).To(BeTrue())
	}
	var tasks cairnv1.RenderTaskList
	e.g.Expect(e.c.List(e.ctx, &tasks, client.InNamespace(reconciler.DefaultNamespace),
		client.MatchingLabels{cairnv1.InstanceLabel: cairnv1.InstanceKey(e.ns, "web")})).To(Succeed())
	for i := range tasks.Items {
		t.Cleanup(func() { _ = e.c.Delete(context.Background(), &tasks.Items[i]) })
	}
	e.g.Expect(tasks.Items).To(HaveLen(3), "the newest three tasks")
	results, sources := map[string]bool{}, map[string]bool{}
	for _, tk := range tasks.Items {
		results[rendertask.Tag(tk.Spec.InputDigest)] = true
		_, d, _ := strings.Cut(tk.Spec.SourceArtifact, "@")
		sources[d] = true
	}
	base := "rendered/cluster/" + e.ns + "/web"
	tags, err := rc.Tags(e.ctx, base+"/render")
	e.g.Expect(err).NotTo(HaveOccurred())
	var live []string
	for _, tag := range tags {
		if _, err := rc.Resolve(e.ctx, base+"/render", tag); err == nil {
			live = append(live, tag)
		}
	}
	e.g.Expect(live).To(ConsistOf(slices.Collect(maps.Keys(results))), "only the kept tasks' results")
	tags, err = rc.Tags(e.ctx, base+"/source")
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, tag := range tags {
		if desc, err := rc.Resolve(e.ctx, base+"/source", tag); err == nil {
			e.g.Expect(sources).To(HaveKey(desc.Digest.String()), "only the kept tasks' sources")
		}
	}
}

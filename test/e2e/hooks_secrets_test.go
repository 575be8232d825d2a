package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// mounterHooks is a chart whose pre-install Job mounts the Secret <release>-db,
// which the chart does not make: the instance generates it (spec.secrets). The
// Job's pod matches no node, so neither the scheduler nor kwok touches it: the
// test plays its kubelet (see secretKubelet).
const mounterHooks = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-init
  annotations:
    helm.sh/hook: pre-install
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {cairn.dev/test-kubelet: "true"}
      containers:
        - name: init
          image: busybox
          volumeMounts: [{name: db, mountPath: /etc/db}]
      volumes:
        - name: db
          secret: {secretName: {{ .Release.Name }}-db}
`

const mounterApp = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data: {ready: "yes"}
`

func mounterChart(t *testing.T) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "mounter", Version: "0.1.0"}}
	ch.Templates = []*chart.File{
		{Name: "templates/app.yaml", Data: []byte(mounterApp)},
		{Name: "templates/hooks.yaml", Data: []byte(mounterHooks)},
	}
	return packaged(t, ch)
}

// secretKubelet plays the kubelet for the pods of one Job: a pod whose Secret
// volumes all exist when it first sees the pod exits 0; one that mounts a missing
// Secret fails at once (a real kubelet would hold it in ContainerCreating until
// the hook's timeout). It records, per pod, the Secrets that were missing.
type secretKubelet struct {
	mu      sync.Mutex
	seen    map[string][]string // pod name -> missing Secrets
	stopped chan struct{}
}

// startSecretKubelet plays the kubelet for the pods of Job job in namespace ns
// until the test ends.
func (e *env) startSecretKubelet(ns, job string) *secretKubelet {
	k := &secretKubelet{seen: map[string][]string{}, stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(func() { cancel(); <-k.stopped })
	go func() {
		defer close(k.stopped)
		for ctx.Err() == nil {
			k.tick(ctx, e.c, ns, job)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return k
}

func (k *secretKubelet) tick(ctx context.Context, c client.Client, ns, job string) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		missing := missingSecrets(ctx, c, p)
		k.mu.Lock()
		if _, ok := k.seen[p.Name]; !ok {
			k.seen[p.Name] = missing
		}
		k.mu.Unlock()
		finishPod(p, missing)
		_ = c.Status().Update(ctx, p) // a conflict is retried at the next tick
	}
}

// missingSecrets are the Secrets p mounts that do not exist.
func missingSecrets(ctx context.Context, c client.Client, p *corev1.Pod) []string {
	missing := []string{}
	for _, v := range p.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: v.Secret.SecretName}, &corev1.Secret{}); err != nil {
			missing = append(missing, v.Secret.SecretName)
		}
	}
	return missing
}

// finishPod sets p's status: exited 0 when no Secret is missing, else failed.
func finishPod(p *corev1.Pod, missing []string) {
	now := metav1.Now()
	term := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
	p.Status.Phase = corev1.PodSucceeded
	if len(missing) > 0 {
		p.Status.Phase = corev1.PodFailed
		p.Status.Message = "secret " + strings.Join(missing, ", ") + " not found"
		term = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: p.Status.Message, StartedAt: now, FinishedAt: now}
	}
	c := p.Spec.Containers[0]
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Terminated: term}}}
}

// pods returns what the kubelet saw: per pod, the Secrets missing when it started.
func (k *secretKubelet) pods() map[string][]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]string{}
	for p, m := range k.seen {
		out[p] = m
	}
	return out
}

// TestHookMountsASecretTheInstanceGenerates: a chart instance whose pre-install
// Job mounts a Secret the same instance generates (spec.secrets) goes Ready on its
// first sync: the generated Secret is written before the pre-install hooks run, so
// the Job's pod finds it (the test's kubelet fails a pod whose Secret is missing).
func TestHookMountsASecretTheInstanceGenerates(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, false, false)
	pushChart(t, e.ctx, registryClient(t, reg, false), "charts/mounter", mounterChart(t), nil)
	secrets := "  secrets:\n    - name: app-db\n      once: true\n      data: {password: {random: {length: 24}}}\n"
	repo := newGitRepo(t, map[string]string{
		"platform.yaml":      platformWithVerify("", ""),
		"registries.yaml":    registryYAML("charts", reg.Host, true, ""),
		"instances/app.yaml": chartInstanceYAML("app", e.ns, "oci://"+reg.Host+"/charts/mounter", "0.1.0", secrets),
	})
	kubelet := e.startSecretKubelet(e.ns, "app-init")

	res := e.sync(repo)
	app := result(res, e.ns, "app")
	e.g.Expect(app.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(app.Message).To(ContainSubstring("1 pre-install"))
	pods := kubelet.pods()
	e.g.Expect(pods).NotTo(BeEmpty(), "the hook Job's pod ran")
	for pod, missing := range pods {
		e.g.Expect(missing).To(BeEmpty(), "pod %s started before its Secret existed", pod)
	}
	secret, job := e.secret(e.ns, "app-db"), e.get("batch/v1", "Job", e.ns, "app-init")
	e.g.Expect(secret).NotTo(BeNil())
	e.g.Expect(secret.Labels).To(HaveKeyWithValue(cairnv1.GeneratedLabel, "true"))
	e.g.Expect(job).NotTo(BeNil())
	e.g.Expect(jobCompleted(job)).NotTo(BeZero(), "the pre-install Job completed")
	e.g.Expect(secret.CreationTimestamp.Time).To(BeTemporally("<=", created(job)))
	e.g.Expect(e.configMap(e.ns, "app-config")).NotTo(BeNil())
	e.expectNoValue(res, e.secretValues("app-db"))
}

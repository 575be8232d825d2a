package e2e

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobModule renders a ConfigMap and a Job whose pod carries values.greeting; kwok
// completes the Job's pod, so the Job controller marks it Complete.
const jobModule = `package job

#config: {
	ttl:      *-1 | int
	greeting: *"hello" | string
	force:    *false | bool
}
instance: {name: string, namespace: string}
values: #config
objects: {
	cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "\(instance.name)-cfg", data: greeting: values.greeting}
	job: {
		apiVersion: "batch/v1"
		kind:       "Job"
		metadata: {
			name: "\(instance.name)-migrate"
			if values.force {annotations: "cairn.dev/force": "true"}
		}
		spec: {
			if values.ttl >= 0 {ttlSecondsAfterFinished: values.ttl}
			backoffLimit: 0
			template: spec: {
				restartPolicy: "Never"
				containers: [{name: "migrate", image: "busybox", env: [{name: "GREETING", value: values.greeting}]}]
			}
		}
	}
}
`

func jobInstanceYAML(name, ns, values string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: ModuleInstance\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"spec:\n  module:\n    local:\n      path: ./modules/job\n  timeout: 1m\n  values: %s\n", name, ns, values)
}

// syncJobRepo syncs a repository with the job module and one instance of it.
func (e *env) syncJobRepo(name, values string) *gitRepo {
	e.t.Helper()
	files := appRepo("")
	files["modules/job/job.cue"] = jobModule
	files["instances/"+name+".yaml"] = jobInstanceYAML(name, e.ns, values)
	repo := newGitRepo(e.t, files)
	res := e.sync(repo)
	e.g.Expect(result(res, e.ns, name).Ready).To(BeTrue(), "%+v", res)
	return repo
}

// job reads the instance's Job; nil when it does not exist.
func (e *env) job(name string) *batchv1.Job {
	e.t.Helper()
	var j batchv1.Job
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &j); err != nil {
		return nil
	}
	return &j
}

// waitJobSucceeded waits until the Job has succeeded (kstatus counts a started Job
// as Current, so the sync does not wait for this). The test plays the kubelet for the
// Job's pods as kwok's pod-complete stage does, since kwok's pod informer lags behind
// on this control plane (its watches end at once on etcd 3.4: "RequestWatchProgress is
// disabled") and would complete them only at its next relist, up to minutes later.
func (e *env) waitJobSucceeded(name string) {
	e.t.Helper()
	e.g.Eventually(func() int32 {
		j := e.job(name)
		if j == nil {
			return 0
		}
		e.completeJobPods(name)
		return j.Status.Succeeded
	}, 30*time.Second, 200*time.Millisecond).Should(Equal(int32(1)), "Job %s succeeds", name)
}

// completeJobPods marks the scheduled pods of a Job as having exited 0.
func (e *env) completeJobPods(job string) {
	var pods corev1.PodList
	e.g.Expect(e.c.List(e.ctx, &pods, client.InNamespace(e.ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job})).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
		_ = e.c.Status().Update(e.ctx, p) // a conflict (kwok was faster) is retried by the next poll
	}
}

func greetingOf(j *batchv1.Job) string { return j.Spec.Template.Spec.Containers[0].Env[0].Value }

// TestJobRunsOnceUnlessForced: a Job that ran is not updated when its template
// changes (no immutable-field error, the instance stays Ready and says so); with
// cairn.dev/force: "true" it is recreated and runs again.
func TestJobRunsOnceUnlessForced(t *testing.T) {
	e := newEnv(t)
	repo := e.syncJobRepo("once", "{}")
	e.waitJobSucceeded("once-migrate")
	first := e.job("once-migrate")

	repo.commit("change the Job", map[string]string{"instances/once.yaml": jobInstanceYAML("once", e.ns, "{greeting: bonjour}")})
	res := e.sync(repo)
	got := result(res, e.ns, "once")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(got.Warnings).To(ContainElement(ContainSubstring("Job/" + e.ns + "/once-migrate has run: left as it is")))
	e.g.Expect(e.configMap(e.ns, "once-cfg").Data).To(HaveKeyWithValue("greeting", "bonjour"), "the rest is applied")
	kept := e.job("once-migrate")
	e.g.Expect(kept.UID).To(Equal(first.UID))
	e.g.Expect(greetingOf(kept)).To(Equal("hello"))

	repo.commit("force the Job", map[string]string{"instances/once.yaml": jobInstanceYAML("once", e.ns, "{greeting: salut, force: true}")})
	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "once").Ready).To(BeTrue(), "%+v", res)
	again := e.job("once-migrate")
	e.g.Expect(again.UID).NotTo(Equal(first.UID), "recreated")
	e.g.Expect(greetingOf(again)).To(Equal("salut"))
	e.waitJobSucceeded("once-migrate")

	res = e.sync(repo)
	e.g.Expect(result(res, e.ns, "once").Action).To(BeEquivalentTo("Unchanged"))
	e.g.Expect(e.job("once-migrate").UID).To(Equal(again.UID), "a forced Job is not recreated by every sync")
}

// TestJobRemovedByItsTTLIsNotCreatedAgain: a finished Job that its
// ttlSecondsAfterFinished removed is created again neither by drift correction nor by
// a sync, not even one that changes its template.
func TestJobRemovedByItsTTLIsNotCreatedAgain(t *testing.T) {
	e := newEnv(t)
	repo := e.syncJobRepo("ttl", "{ttl: 1}")
	// The TTL controller deletes only a finished Job, so its absence shows it succeeded;
	// waiting for Succeeded instead would race the one-second TTL.
	e.g.Eventually(func() *batchv1.Job {
		e.completeJobPods("ttl-migrate")
		return e.job("ttl-migrate")
	}, 60*time.Second, 200*time.Millisecond).Should(BeNil(), "the Job finishes and the TTL controller removes it")

	e.g.Expect(e.c.Delete(e.ctx, e.configMap(e.ns, "ttl-cfg"))).To(Succeed())
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	var drifted []string
	for _, r := range reports {
		if r.Namespace == e.ns && r.Name == "ttl" {
			e.g.Expect(r.Err).NotTo(HaveOccurred())
			drifted = r.Drifted
		}
	}
	e.g.Expect(drifted).To(ConsistOf("ConfigMap/" + e.ns + "/ttl-cfg"))
	e.g.Expect(e.configMap(e.ns, "ttl-cfg")).NotTo(BeNil(), "drift correction still works for the rest")
	e.g.Expect(e.job("ttl-migrate")).To(BeNil(), "not created again by drift correction")

	e.g.Expect(result(e.sync(repo), e.ns, "ttl").Action).To(BeEquivalentTo("Unchanged"))
	repo.commit("change the Job", map[string]string{"instances/ttl.yaml": jobInstanceYAML("ttl", e.ns, "{ttl: 1, greeting: bonjour}")})
	res := e.sync(repo)
	got := result(res, e.ns, "ttl")
	e.g.Expect(got.Ready).To(BeTrue(), "%+v", res)
	e.g.Expect(got.Warnings).To(ContainElement(ContainSubstring("ran and is gone (ttlSecondsAfterFinished)")))
	e.g.Expect(e.job("ttl-migrate")).To(BeNil(), "not created again by a sync")
	e.g.Expect(e.configMap(e.ns, "ttl-cfg").Data).To(HaveKeyWithValue("greeting", "bonjour"))
}

package rendertask

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// PodLabel marks a render Job's pods (with the task's name).
const PodLabel = "cairn.dev/render-task"

// Mount paths of a render Job's pod (the defaults of `cairn render-task`).
const (
	specDir    = "/etc/cairn/task"
	publishDir = "/etc/cairn/registries/publish"
	modulesDir = "/etc/cairn/registries/modules"
	caDir      = "/etc/cairn/ca"
	tmpDir     = "/tmp"
)

// What a render Job's pod gets beside the render's own limits.
const (
	// JobStartup is the time its pod may take to start (scheduling, the image pull)
	// on top of the render's deadline: the Job's activeDeadlineSeconds.
	JobStartup = time.Minute
	// podOverhead is the memory of the process around the render.
	podOverhead = 128 << 20
	// tmpBytes bounds its writable directory: the source and the module cache.
	tmpBytes = 4 * MaxSourceBytes
	// nonRootUID is the user it runs as (the controller image's).
	nonRootUID = 65532
)

// JobOptions are the controller's settings of its render Jobs.
type JobOptions struct {
	// Image runs the Job; Command and Args start `cairn render-task` in it.
	Image   string
	Command []string
	Args    []string
	// ImagePullSecrets name Secrets of cairn's namespace.
	ImagePullSecrets []string
	// BackoffLimit is the Job's (0: a failed render is not retried in the Job; the
	// instance's own retry renders again).
	BackoffLimit int32
	// CPU is the pod's CPU request and limit ("" for none).
	CPU string
	// CAConfigMap names a ConfigMap of cairn's namespace whose ca.crt every render
	// pod trusts for every registry it talks to, beside each Registry's own CA.
	CAConfigMap string
	// FailedJobTTL is how long a failed task's Job and config Secret stay for
	// whoever looks into the failure (0: DefaultFailedJobTTL).
	FailedJobTTL time.Duration
}

// DefaultFailedJobTTL is JobOptions.FailedJobTTL's default.
const DefaultFailedJobTTL = time.Hour

// FailedTTL is o.FailedJobTTL or its default.
func (o JobOptions) FailedTTL() time.Duration {
	if o.FailedJobTTL > 0 {
		return o.FailedJobTTL
	}
	return DefaultFailedJobTTL
}

// ConfigLabel marks a task's config Secret (with the task's name); ExpiresAnnotation
// says, on the config Secret of a task that failed, when it is deleted (RFC 3339).
const (
	ConfigLabel       = "cairn.dev/render-config"
	ExpiresAnnotation = "cairn.dev/expires"
)

// Name is the name of the task that renders the input inputDigest of the
// instance namespace/name: the same input always gets the same task, and a name
// is a DNS label (the Job and its pods are named from it).
func Name(namespace, name, inputDigest string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name + "\x00" + inputDigest))
	prefix := strings.ToLower(name)
	if len(prefix) > 30 {
		prefix = prefix[:30]
	}
	prefix = strings.Trim(prefix, "-.")
	return fmt.Sprintf("%s-%s", prefix, hex.EncodeToString(h[:])[:16])
}

// JobName is the name of the Job of the task named task (its pods carry
// PodLabel with the task's name).
func JobName(task string) string { return "render-" + task }

// Mounts says which registries' credentials a task's pod mounts: the publish
// Registry's Secret and, for a render that reads the module registry, its Secret
// (empty: none), and their CA ConfigMaps.
type Mounts struct {
	PublishSecret, PublishCA string
	ModulesSecret, ModulesCA string
}

// Job is the Job of task, owned by it, running opts.Image with the config Secret
// configSecret, the registries' Secrets and CAs of m, no API token, as non-root
// with a read-only root filesystem and every capability dropped, within timeout
// and memory bytes of memory.
func Job(task *cairnv1.RenderTask, configSecret string, m Mounts, opts JobOptions, timeout time.Duration, memory int64) *batchv1.Job {
	labels := map[string]string{PodLabel: task.Name}
	args := append([]string{}, opts.Args...)
	volumes := []corev1.Volume{
		secretVolume("task", configSecret),
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(tmpBytes, resource.BinarySI)}}},
	}
	mounts := []corev1.VolumeMount{{Name: "task", MountPath: specDir, ReadOnly: true}, {Name: "tmp", MountPath: tmpDir}}
	add := func(name, secret, dir string) {
		if secret == "" {
			return
		}
		volumes = append(volumes, secretVolume(name, secret))
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
	}
	add("publish", m.PublishSecret, publishDir)
	add("modules", m.ModulesSecret, modulesDir)
	for i := range volumes { // of a Registry's Secret, only its credential keys (never a signing key kept beside them)
		if v := volumes[i].Secret; v != nil && volumes[i].Name != "task" {
			v.Optional = ptr.To(true)
			for _, k := range []string{"username", "password", ".dockerconfigjson", ".dockercfg"} {
				v.Items = append(v.Items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
	}
	addCA := func(name, configMap, flag string) {
		if configMap == "" {
			return
		}
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: caDir + "/" + name, ReadOnly: true})
		args = append(args, flag, caDir+"/"+name+"/ca.crt")
	}
	addCA("publish-ca", m.PublishCA, "--registry-ca")
	addCA("modules-ca", m.ModulesCA, "--module-registry-ca")
	addCA("renderer-ca", opts.CAConfigMap, "--ca-bundle")
	args = append(args, "--registry-config", publishDir, "--module-registry-config", modulesDir, "--tmp-dir", tmpDir)
	resources := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if memory > 0 {
		// The render's budget is its own (it fails LimitExceeded within it); the
		// pod's limit adds the process around it, so the kernel does not kill first.
		q := *resource.NewQuantity(memory+podOverhead, resource.BinarySI)
		resources.Limits[corev1.ResourceMemory], resources.Requests[corev1.ResourceMemory] = q, q
	}
	if opts.CPU != "" {
		q := resource.MustParse(opts.CPU)
		resources.Limits[corev1.ResourceCPU], resources.Requests[corev1.ResourceCPU] = q, q
	}
	var pull []corev1.LocalObjectReference
	for _, s := range opts.ImagePullSecrets {
		pull = append(pull, corev1.LocalObjectReference{Name: s})
	}
	deadline := int64((timeout + JobStartup).Seconds())
	if deadline < 1 {
		deadline = 1
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: JobName(task.Name), Namespace: task.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{owner(task)}},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(opts.BackoffLimit),
			ActiveDeadlineSeconds: ptr.To(deadline),
			// A failed Job stays FailedJobTTL for its logs (a succeeded one is
			// removed by the controller once it fetched the render).
			TTLSecondsAfterFinished: ptr.To(int32(opts.FailedTTL().Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					ImagePullSecrets:             pull,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						RunAsUser: ptr.To[int64](nonRootUID), RunAsGroup: ptr.To[int64](nonRootUID), FSGroup: ptr.To[int64](nonRootUID),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Volumes: volumes,
					Containers: []corev1.Container{{
						Name: "render", Image: opts.Image, Command: opts.Command, Args: args,
						VolumeMounts: mounts, Resources: resources,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

// owner is the owner reference of an object a task owns: deleting the task
// collects it.
func owner(task *cairnv1.RenderTask) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: cairnv1.GroupVersion.String(), Kind: "RenderTask", Name: task.Name, UID: task.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// Owned is the owner reference of an object task owns.
func Owned(task *cairnv1.RenderTask) metav1.OwnerReference { return owner(task) }

package controller

import (
	"fmt"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Paths inside the controller's container.
const (
	CacheDir       = "/var/cache/cairn"
	credentialsDir = "/etc/cairn"
	tmpDir         = "/tmp"
)

// uid is the image's non-root user (hack/image).
const uid = 65532

func deployment(o Options) *appsv1.Deployment {
	labels := selectorLabels()
	return &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: meta(o.Namespace, Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(labels),
				Spec:       podSpec(o),
			},
		},
	}
}

func podSpec(o Options) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:            Name,
		TerminationGracePeriodSeconds: ptr.To[int64](60),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](uid), RunAsGroup: ptr.To[int64](uid), FSGroup: ptr.To[int64](uid),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Affinity:   spreadAcrossNodes(),
		Containers: []corev1.Container{container(o)},
		Volumes:    volumes(o),
	}
}

// spreadAcrossNodes prefers replicas on different nodes, so one node's loss leaves a
// replica to take the Lease.
func spreadAcrossNodes() *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: selectorLabels()}}}},
	}}
}

func container(o Options) corev1.Container {
	return corev1.Container{
		Name:            "controller",
		Image:           o.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            Args(o),
		Env:             env(),
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "probes", ContainerPort: ProbePort, Protocol: corev1.ProtocolTCP},
			{Name: "webhook", ContainerPort: WebhookPort, Protocol: corev1.ProtocolTCP},
			{Name: "dashboard", ContainerPort: DashboardPort, Protocol: corev1.ProtocolTCP},
		},
		LivenessProbe:  probe("/healthz"),
		ReadinessProbe: probe("/readyz"),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(MemoryLimit, resource.BinarySI)},
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: mounts(o),
	}
}

func probe(p string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: p, Port: intstr.FromString("probes")}},
		PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3}
}

// env gives the pod's name and namespace (the downward API): the Lease's holder starts
// with the pod's name, and the Lease lives in the pod's namespace. GOMEMLIMIT is the
// controller's own share of the memory limit (see memory.go: the render workers have
// the rest), so the Go runtime collects before the kernel kills.
func env() []corev1.EnvVar {
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: p}}
	}
	return []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
		{Name: "GOMEMLIMIT", Value: GoMemLimit()},
	}
}

// Args are the controller container's arguments: `cairn controller` with leader
// election, the source flags, the credential files at their mounted paths, the
// render workers that fit in the memory limit (DefaultRenderSizing) and the fixed
// ports and cache directory of the Deployment.
func Args(o Options) []string {
	rs := DefaultRenderSizing()
	args := []string{"controller", "--leader-elect", "--namespace", o.Namespace,
		"--repo", o.Repo, "--branch", o.Branch, "--path", o.Path, "--interval", o.Interval.String(),
		"--cache-dir", CacheDir, "--log-format", "json",
		"--render-workers", fmt.Sprint(rs.Workers), "--render-memory", formatBytes(rs.Budget),
		"--metrics-bind-address", fmt.Sprintf(":%d", MetricsPort), "--health-probe-bind-address", fmt.Sprintf(":%d", ProbePort),
		"--renderer-image", o.Image} // render Jobs run the controller's own image
	if o.NoDashboard {
		args = append(args, "--dashboard-bind-address", "0")
	} else {
		args = append(args, "--dashboard-bind-address", fmt.Sprintf(":%d", DashboardPort))
	}
	if o.GitUsername != "" {
		args = append(args, "--git-username", o.GitUsername)
	}
	for _, f := range credentialFiles(o.Credentials) {
		args = append(args, f.flag, f.path())
	}
	if o.Forge != "" {
		args = append(args, "--forge", o.Forge)
		args = appendIf(args, "--forge-url", o.ForgeURL)
		args = appendIf(args, "--forge-repo", o.ForgeRepo)
		args = appendIf(args, "--status-url", o.StatusURL)
	}
	if len(o.Credentials.WebhookSecret) > 0 {
		args = append(args, "--webhook-bind-address", fmt.Sprintf(":%d", WebhookPort))
	}
	return append(args, "--shards", fmt.Sprint(o.Shards))
}

func appendIf(args []string, flag, value string) []string {
	if value == "" {
		return args
	}
	return append(args, flag, value)
}

// scratch are the writable directories of the read-only root file system.
var scratch = []struct{ name, path string }{{"cache", CacheDir}, {"tmp", tmpDir}}

func volumes(o Options) []corev1.Volume {
	var vs []corev1.Volume
	for _, s := range scratch {
		vs = append(vs, corev1.Volume{Name: s.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	for _, s := range credentialSecrets(o.Credentials) {
		vs = append(vs, corev1.Volume{Name: s.secret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s.secret, DefaultMode: ptr.To[int32](0o440)}}})
	}
	return vs
}

func mounts(o Options) []corev1.VolumeMount {
	var ms []corev1.VolumeMount
	for _, s := range scratch {
		ms = append(ms, corev1.VolumeMount{Name: s.name, MountPath: s.path})
	}
	for _, s := range credentialSecrets(o.Credentials) {
		ms = append(ms, corev1.VolumeMount{Name: s.secret, MountPath: path.Join(credentialsDir, s.dir), ReadOnly: true})
	}
	return ms
}

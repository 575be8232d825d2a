package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Labels every object of the controller carries: managed-by cairn (so no instance can
// adopt or prune one), part-of cairn, component controller.
func Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "cairn", "app.kubernetes.io/component": "controller",
		"app.kubernetes.io/part-of": "cairn", "app.kubernetes.io/managed-by": "cairn"}
}

func selectorLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "cairn", "app.kubernetes.io/component": "controller"}
}

func meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: Labels()}
}

func podMeta(labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: labels}
}

// Objects are the controller's objects in apply order, without the CRDs and the
// credential Secrets: Namespace, ServiceAccount, RBAC, Service, PodDisruptionBudget,
// Deployment.
func Objects(o Options) ([]client.Object, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	objs := append([]client.Object{Namespace(o.Namespace)}, Removable(o)...)
	return objs, nil
}

// Namespace is cairn's namespace.
func Namespace(ns string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "cairn"}}}
}

// Removable are the objects `cairn uninstall` deletes: everything of the controller
// but its namespace (which holds the Registries' Secrets), the credential Secrets and
// the CRDs. The binding of AllowApplyAsController is among them when set.
func Removable(o Options) []client.Object {
	objs := []client.Object{
		serviceAccount(o.Namespace),
		clusterRole(!o.NoWorkloadWatch), clusterRoleBinding(o.Namespace, Name, Name), role(o.Namespace), roleBinding(o.Namespace),
	}
	if o.AllowApplyAsController {
		objs = append(objs, clusterRoleBinding(o.Namespace, ApplyAsControllerBinding, "cluster-admin"))
	}
	objs = append(objs, DashboardUserRoles()...)
	if !o.NoDashboard {
		objs = append(objs, dashboardRole(), clusterRoleBinding(o.Namespace, DashboardRole, DashboardRole))
	}
	return append(objs, service(o.Namespace), podDisruptionBudget(o.Namespace), deployment(o))
}

func serviceAccount(ns string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(ns, Name)}
}

// service exposes the webhook receiver (served by the leader), the metrics and the
// dashboard.
func service(ns string) *corev1.Service {
	return &corev1.Service{TypeMeta: typeMeta("v1", "Service"), ObjectMeta: meta(ns, Name),
		Spec: corev1.ServiceSpec{Selector: selectorLabels(), Ports: []corev1.ServicePort{
			{Name: "webhook", Port: 80, TargetPort: intstr.FromString("webhook"), Protocol: corev1.ProtocolTCP},
			{Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
			{Name: "dashboard", Port: DashboardPort, TargetPort: intstr.FromString("dashboard"), Protocol: corev1.ProtocolTCP},
		}}}
}

// podDisruptionBudget keeps one replica through a node drain.
func podDisruptionBudget(ns string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{TypeMeta: typeMeta("policy/v1", "PodDisruptionBudget"), ObjectMeta: meta(ns, Name),
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels()}}}
}

// ToUnstructured converts typed objects for server-side apply.
func ToUnstructured(objs ...client.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("failed to convert %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
	return out, nil
}

// YAML writes objects as one YAML stream, documents separated by "---".
func YAML(objs []*unstructured.Unstructured) ([]byte, error) {
	var out []byte
	for i, u := range objs {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("failed to write %s %s as YAML: %w", u.GetKind(), u.GetName(), err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

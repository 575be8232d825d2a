package declarations

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// validateMetadata checks the name, namespace, labels and annotations of a declaration.
func validateMetadata(kind string, obj metav1.Object) []problem {
	ps := validateName(kind, obj.GetName())
	ps = append(ps, validateNamespace(kind, obj.GetNamespace(), obj.GetName())...)
	ps = append(ps, validateKeys("metadata.labels", obj.GetLabels(), true)...)
	ps = append(ps, validateKeys("metadata.annotations", obj.GetAnnotations(), false)...)
	return append(ps, controlAnnotations(obj.GetAnnotations())...)
}

// clusterOnlyAnnotations are the annotations a ModuleInstance gets in the cluster
// only: requests of cairn's commands (hold, suspend, reconcile), naming who asked,
// which a declaration in Git would forge and replay at every sync.
var clusterOnlyAnnotations = []string{cairnv1.HoldAnnotation, cairnv1.SuspendAnnotation, cairnv1.ReconcileRequestAnnotation}

// controlAnnotations refuses the cluster-only annotations in a declaration.
func controlAnnotations(m map[string]string) []problem {
	var ps []problem
	for _, k := range clusterOnlyAnnotations {
		if _, ok := m[k]; ok {
			ps = append(ps, problem{ReasonInvalidDeclaration, "metadata.annotations." + k,
				"not allowed in Git: it is a request made in the cluster (cairn hold, cairn suspend, cairn reconcile); in Git, use spec.suspend"})
		}
	}
	if _, ok := m[cairnv1.TenantAnnotation]; ok {
		ps = append(ps, problem{ReasonInvalidDeclaration, "metadata.annotations." + cairnv1.TenantAnnotation,
			"not allowed in Git: cairn writes it from the tenant whose paths hold the declaration"})
	}
	return ps
}

func validateName(kind, name string) []problem {
	if kind == cairnv1.PlatformKind && name != cairnv1.PlatformName {
		return []problem{{ReasonInvalidDeclaration, "metadata.name", fmt.Sprintf("must be %q, the only Platform name", cairnv1.PlatformName)}}
	}
	return invalid("metadata.name", content.IsDNS1123Subdomain(name))
}

func validateNamespace(kind, namespace, name string) []problem {
	if kind != cairnv1.ModuleInstanceKind {
		if namespace != "" {
			return []problem{{ReasonInvalidDeclaration, "metadata.namespace", "not allowed: " + kind + " is cluster-scoped"}}
		}
		return nil
	}
	if msgs := content.IsDNS1123Label(namespace); len(msgs) > 0 {
		return invalid("metadata.namespace", msgs)
	}
	// The instance label value <namespace>.<name> must itself be a valid label value.
	if msgs := content.IsLabelValue(cairnv1.InstanceKey(namespace, name)); len(msgs) > 0 {
		return []problem{{ReasonInvalidDeclaration, "metadata.name",
			fmt.Sprintf("namespace and name together are too long for the %s label: %s", cairnv1.InstanceLabel, strings.Join(msgs, "; "))}}
	}
	return nil
}

// validateKeys checks label or annotation keys, and label values.
func validateKeys(field string, m map[string]string, labels bool) []problem {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ps []problem
	for _, k := range keys {
		if !labels {
			// Like Kubernetes, annotation keys are checked case-insensitively.
			ps = append(ps, invalid(field+"."+k, content.IsLabelKey(strings.ToLower(k)))...)
			continue
		}
		ps = append(ps, invalid(field+"."+k, content.IsLabelKey(k))...)
		ps = append(ps, invalid(field+"."+k, content.IsLabelValue(m[k]))...)
	}
	return ps
}

// invalid turns validation messages into one problem, or none.
func invalid(field string, msgs []string) []problem {
	if len(msgs) == 0 {
		return nil
	}
	return []problem{{ReasonInvalidDeclaration, field, "invalid: " + strings.Join(msgs, "; ")}}
}

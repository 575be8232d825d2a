package declarations

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

var (
	// semverPattern is an exact version, as in the CRD.
	semverPattern = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	// modulePattern is a CUE module path with its major version, e.g. example.com/catalog@v0.
	modulePattern = regexp.MustCompile(`^[^@\s]+@v\d+$`)
)

// oneOf checks an enum; the empty value means unset and is accepted.
func oneOf(field, value string, allowed ...string) []problem {
	if value == "" {
		return nil
	}
	for _, a := range allowed {
		if a == value {
			return nil
		}
	}
	return []problem{{ReasonInvalidDeclaration, field, fmt.Sprintf("unsupported value %q, want one of %s", value, strings.Join(allowed, ", "))}}
}

func required(field string) []problem {
	return []problem{{ReasonInvalidDeclaration, field, "required"}}
}

// requiredName checks the name of a Kubernetes object that must be given.
func requiredName(field, name string) []problem {
	if name == "" {
		return required(field)
	}
	return invalid(field, content.IsDNS1123Subdomain(name))
}

// optionalName checks the name of a Kubernetes object that may be left empty.
func optionalName(field, name string) []problem {
	if name == "" {
		return nil
	}
	return invalid(field, content.IsDNS1123Subdomain(name))
}

func positiveDuration(field string, d *metav1.Duration) []problem {
	if d == nil || d.Duration > 0 {
		return nil
	}
	return []problem{{ReasonInvalidDeclaration, field, "must be greater than zero"}}
}

// namespaceAllowed reports a namespace the Platform's policy denies, naming the deny
// pattern that matches it or the allow patterns that do not.
func namespaceAllowed(policy cairnv1.NamespacePolicy, field, ns string) []problem {
	if policy.Allows(ns) {
		return nil
	}
	for _, p := range policy.Deny {
		if ok, _ := path.Match(p, ns); ok {
			return []problem{{ReasonNamespaceDenied, field, fmt.Sprintf("namespace %q is denied by the Platform's pattern %q", ns, p)}}
		}
	}
	return []problem{{ReasonNamespaceDenied, field,
		fmt.Sprintf("namespace %q matches none of the Platform's allowed patterns %q", ns, policy.Allow)}}
}

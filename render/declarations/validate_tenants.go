package declarations

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/globs"
)

// validateTenants checks spec.tenants: unique names, path globs, namespace patterns, a
// ServiceAccount, cluster kinds and limits for each; then that no two tenants share a
// file or a namespace and that none has cairn's namespace cairnNS.
func validateTenants(tenants []cairnv1.Tenant, cairnNS string) []problem {
	var ps []problem
	seen := map[string]bool{}
	for i, t := range tenants {
		field := fmt.Sprintf("spec.tenants[%d]", i)
		switch {
		case t.Name == "":
			ps = append(ps, required(field+".name")...)
		case len(content.IsDNS1123Label(t.Name)) > 0:
			ps = append(ps, invalid(field+".name", content.IsDNS1123Label(t.Name))...)
		case seen[t.Name]:
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".name", fmt.Sprintf("tenant %q is declared twice", t.Name)})
		}
		seen[t.Name] = true
		ps = append(ps, validateTenant(field, t)...)
	}
	if len(ps) > 0 {
		return ps // the patterns are compared only once each is valid
	}
	return tenantBounds(tenants, cairnNS)
}

func validateTenant(field string, t cairnv1.Tenant) []problem {
	ps := validatePaths(field+".paths", t.Paths)
	if len(t.Namespaces) == 0 {
		ps = append(ps, problem{ReasonInvalidDeclaration, field + ".namespaces", "at least one namespace pattern is required"})
	}
	ps = append(ps, validatePatterns(field+".namespaces", t.Namespaces)...)
	ps = append(ps, requiredName(field+".serviceAccount", t.ServiceAccount)...)
	ps = append(ps, validateGroupKinds(field+".clusterResources", t.ClusterResources)...)
	return append(ps, validateLimits(field+".limits", t.Limits)...)
}

// validatePaths checks a tenant's path globs: relative to the root, without "..", and
// valid doublestar patterns.
func validatePaths(field string, paths []string) []problem {
	if len(paths) == 0 {
		return []problem{{ReasonInvalidDeclaration, field, "at least one path glob is required"}}
	}
	var ps []problem
	for i, p := range paths {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case p == "":
			ps = append(ps, required(f)...)
		case strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || hasDotDot(p):
			ps = append(ps, problem{ReasonInvalidDeclaration, f, fmt.Sprintf("%q must be relative to the repository root, with forward slashes and no ..", p)})
		case !doublestar.ValidatePattern(p):
			ps = append(ps, problem{ReasonInvalidDeclaration, f, fmt.Sprintf("%q is not a valid glob", p)})
		case globs.Unsupported(p) != "":
			ps = append(ps, problem{ReasonInvalidDeclaration, f, fmt.Sprintf("%q: %s", p, globs.Unsupported(p))})
		}
	}
	return ps
}

func hasDotDot(p string) bool {
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return true
		}
	}
	return false
}

// validateGroupKinds checks that each entry names a kind.
func validateGroupKinds(field string, gks []cairnv1.GroupKind) []problem {
	var ps []problem
	for i, gk := range gks {
		if gk.Kind == "" {
			ps = append(ps, required(fmt.Sprintf("%s[%d].kind", field, i))...)
		}
	}
	return ps
}

// validateLimits checks that the limits given are positive.
func validateLimits(field string, l cairnv1.Limits) []problem {
	ps := positiveDuration(field+".maxTimeout", l.MaxTimeout)
	quantities := []struct {
		name string
		q    *resource.Quantity
	}{{"renderMemory", l.RenderMemory}, {"maxFileBytes", l.MaxFileBytes}, {"maxModuleBytes", l.MaxModuleBytes}}
	for _, q := range quantities {
		if q.q != nil && q.q.Sign() <= 0 {
			ps = append(ps, problem{ReasonInvalidDeclaration, field + "." + q.name, "must be greater than zero"})
		}
	}
	if l.MaxFileDocuments != nil && *l.MaxFileDocuments < 1 {
		ps = append(ps, problem{ReasonInvalidDeclaration, field + ".maxFileDocuments", "must be at least 1"})
	}
	return ps
}

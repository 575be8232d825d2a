package declarations

import (
	"fmt"
	"path"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/globs"
)

// tenantBounds refuses tenants whose bounds meet: two tenants' path globs that match
// one file, two tenants' namespace patterns that match one namespace, or a tenant's
// pattern that matches cairn's namespace cairnNS. Each problem is on the later
// tenant's pattern and names both tenants and a file or namespace both match.
func tenantBounds(tenants []cairnv1.Tenant, cairnNS string) []problem {
	var ps []problem
	for j := range tenants {
		later := &tenants[j]
		if p := cairnNamespaceIn(j, later, cairnNS); p != nil {
			ps = append(ps, *p)
		}
		for i := range tenants[:j] {
			ps = append(ps, overlaps(globs.Path, "paths", i, j, tenants[i].Paths, later.Paths, tenants[i].Name, later.Name)...)
			ps = append(ps, overlaps(globs.Namespace, "namespaces", i, j, tenants[i].Namespaces, later.Namespaces, tenants[i].Name, later.Name)...)
		}
	}
	return ps
}

// cairnNamespaceIn refuses a namespace pattern of tenant t (the j-th) that matches cairnNS.
func cairnNamespaceIn(j int, t *cairnv1.Tenant, cairnNS string) *problem {
	if cairnNS == "" {
		return nil
	}
	for k, pattern := range t.Namespaces {
		if ok, _ := path.Match(pattern, cairnNS); ok {
			return &problem{ReasonTenantViolation, fmt.Sprintf("spec.tenants[%d].namespaces[%d]", j, k),
				fmt.Sprintf("tenant %s: pattern %q matches cairn's own namespace %q, which no instance may use", t.Name, pattern, cairnNS)}
		}
	}
	return nil
}

// overlaps compares every pattern of the i-th tenant (named first) with every one of
// the j-th (named second), in the dialect d, under spec.tenants[j].<list>.
func overlaps(d globs.Dialect, list string, i, j int, firsts, seconds []string, first, second string) []problem {
	what := map[globs.Dialect]string{globs.Path: "file", globs.Namespace: "namespace"}[d]
	var ps []problem
	for k, b := range seconds {
		field := fmt.Sprintf("spec.tenants[%d].%s[%d]", j, list, k)
		for _, a := range firsts {
			example, ok, err := globs.Overlap(d, a, b)
			switch {
			case err != nil:
				ps = append(ps, problem{ReasonInvalidDeclaration, field,
					fmt.Sprintf("tenant %s: cannot be checked against tenant %s's %q: %v", second, first, a, err)})
			case ok:
				ps = append(ps, problem{ReasonTenantViolation, field,
					fmt.Sprintf("tenant %s's %q overlaps tenant %s's %q (spec.tenants[%d]): both match %s %q; each %s belongs to one tenant",
						second, b, first, a, i, what, example, what)})
			}
			if err != nil || ok {
				break
			}
		}
	}
	return ps
}

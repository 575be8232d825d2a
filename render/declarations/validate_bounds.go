package declarations

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// validateTenancy checks that an instance under a tenant's paths applies as the
// tenant's ServiceAccount (its namespace is checked on admission, see admit).
func (c instanceContext) validateTenancy(mi *cairnv1.ModuleInstance) []problem {
	t := c.tenant
	if t == nil {
		return nil
	}
	if sa := mi.Spec.ServiceAccountName; sa != "" && sa != t.ServiceAccount {
		return []problem{{ReasonTenantViolation, "spec.serviceAccountName",
			fmt.Sprintf("tenant %s: must be empty or the tenant's ServiceAccount %q, not %q", t.Name, t.ServiceAccount, sa)}}
	}
	if k := mi.Spec.Module.Kustomize; k != nil && !c.kustomizeOwnedBy(t, k.Path) {
		return []problem{{ReasonTenantViolation, "spec.module.kustomize.path",
			fmt.Sprintf("tenant %s: %q is outside the tenant's paths %q (a kustomize path is relative to the repository root)", t.Name, k.Path, t.Paths)}}
	}
	return nil
}

// kustomizeOwnedBy reports whether the kustomize directory dir (relative to the
// repository root) lies in tenant t's paths: inside the directory the declarations
// were read from, with its kustomization.yaml matched by one of t's path globs.
func (c instanceContext) kustomizeOwnedBy(t *cairnv1.Tenant, dir string) bool {
	rel, ok := underRoot(c.root, cleanDir(dir))
	if !ok {
		return false
	}
	probe := path.Join(rel, "kustomization.yaml")
	for _, glob := range t.Paths {
		if ok, err := doublestar.Match(glob, probe); err == nil && ok {
			return true
		}
	}
	return false
}

// cleanDir is a module directory as validatePath accepts it, cleaned: "./a/" is
// "a", "./" and "." are ".".
func cleanDir(dir string) string {
	return path.Clean(strings.TrimPrefix(dir, "./"))
}

// underRoot returns p (relative to the repository) relative to root (a directory of
// the repository), and whether p is inside root at all.
func underRoot(root, p string) (string, bool) {
	root = path.Clean(root)
	switch {
	case root == ".":
		return p, true
	case p == root:
		return ".", true
	case strings.HasPrefix(p, root+"/"):
		return strings.TrimPrefix(p, root+"/"), true
	}
	return "", false
}

// validateLimits checks what an instance sets against the Platform's limits, tightened
// by its tenant's: the longest timeout and the grants to loosen the prune guards.
func (c instanceContext) validateLimits(mi *cairnv1.ModuleInstance) []problem {
	spec := &c.platform.Spec
	own, eff := spec.Effective(nil), spec.Effective(c.tenant)
	var ps []problem
	if d := mi.Spec.Timeout; d != nil && d.Duration > eff.MaxTimeout {
		ps = append(ps, problem{ReasonLimitExceeded, "spec.timeout", fmt.Sprintf("%s exceeds the longest timeout allowed, %s (%s)",
			d.Duration, eff.MaxTimeout, limitField(spec, c.tenant, "maxTimeout", eff.MaxTimeout < own.MaxTimeout))})
	}
	if mi.Spec.PruneProtected && !eff.AllowPruneProtected {
		ps = append(ps, c.notGranted("spec.pruneProtected", "allowPruneProtected", own.AllowPruneProtected))
	}
	if mi.Spec.AllowEmpty && !eff.AllowEmpty {
		ps = append(ps, c.notGranted("spec.allowEmpty", "allowEmpty", own.AllowEmpty))
	}
	return ps
}

// notGranted reports a field the limits do not grant: the tenant's limit when the
// Platform grants it, else the Platform's.
func (c instanceContext) notGranted(field, limit string, platformGrants bool) problem {
	return problem{ReasonLimitExceeded, field,
		fmt.Sprintf("not granted: %s is not true", limitField(&c.platform.Spec, c.tenant, limit, platformGrants))}
}

// validateValuesFrom checks that each entry names a Secret and a key.
func validateValuesFrom(refs []cairnv1.ValuesReference) []problem {
	var ps []problem
	for i, r := range refs {
		field := fmt.Sprintf("spec.valuesFrom[%d].secretRef", i)
		ps = append(ps, requiredName(field+".name", r.SecretRef.Name)...)
		if r.SecretRef.Key == "" {
			ps = append(ps, required(field+".key")...)
		} else {
			ps = append(ps, invalid(field+".key", validation.IsConfigMapKey(r.SecretRef.Key))...)
		}
	}
	return ps
}

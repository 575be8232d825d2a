package declarations

import (
	"fmt"
	"path"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// registryLookup reports whether a Registry is declared, and whether it is valid.
type registryLookup func(name string) (declared, valid bool)

// validatePlatform checks the Platform's spec and its references to Registries;
// cairnNS is cairn's own namespace ("" when unknown).
func validatePlatform(p *cairnv1.Platform, registry registryLookup, cairnNS string) []problem {
	s := p.Spec
	ps := validateCatalogs(s.Catalogs)
	ps = append(ps, oneOf("spec.skewPolicy", string(s.SkewPolicy), string(cairnv1.SkewWarn), string(cairnv1.SkewRefuse))...)
	ps = append(ps, oneOf("spec.verify.mode", string(s.Verify.Mode),
		string(cairnv1.VerifyEnforce), string(cairnv1.VerifyWarn), string(cairnv1.VerifyOff))...)
	ps = append(ps, oneOf("spec.render.mode", string(s.Render.Mode), string(cairnv1.RenderInProcess), string(cairnv1.RenderJob))...)
	ps = append(ps, renderJobNeedsPublish(s.Render)...)
	ps = append(ps, validatePrune(s.Prune)...)
	ps = append(ps, validatePatterns("spec.namespaces.allow", s.Namespaces.Allow)...)
	ps = append(ps, validatePatterns("spec.namespaces.deny", s.Namespaces.Deny)...)
	ps = append(ps, optionalName("spec.defaultServiceAccount", s.DefaultServiceAccount)...)
	ps = append(ps, registryReference("spec.moduleRegistry", s.ModuleRegistry, registry)...)
	ps = append(ps, validateGroupKinds("spec.clusterResources", s.ClusterResources)...)
	ps = append(ps, validateLimits("spec.limits", s.Limits)...)
	ps = append(ps, validateTenants(s.Tenants, cairnNS)...)
	return append(ps, validatePublish(s.Render.Publish, registry)...)
}

// renderJobNeedsPublish refuses render mode Job without render.publish: a render
// Job pushes its render there, and the controller fetches it from there
// (docs/render-jobs.md).
func renderJobNeedsPublish(r cairnv1.RenderPolicy) []problem {
	if r.Mode != cairnv1.RenderJob || r.Publish != nil {
		return nil
	}
	return []problem{{ReasonInvalidDeclaration, "spec.render.mode",
		"render mode Job needs spec.render.publish: a render Job pushes its render to that repository, and cairn fetches it from there"}}
}

func validateCatalogs(catalogs []cairnv1.Catalog) []problem {
	var ps []problem
	seen := map[string]bool{}
	for i, c := range catalogs {
		field := fmt.Sprintf("spec.catalogs[%d]", i)
		switch {
		case !modulePattern.MatchString(c.Module):
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".module", fmt.Sprintf("%q is not a module path with its major version, e.g. example.com/catalog@v0", c.Module)})
		case seen[c.Module]:
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".module", fmt.Sprintf("%q is pinned twice", c.Module)})
		}
		seen[c.Module] = true
		if !semverPattern.MatchString(c.Version) {
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".version", fmt.Sprintf("%q is not an exact version, e.g. v0.3.1", c.Version)})
		}
	}
	return ps
}

func validatePrune(p cairnv1.PrunePolicy) []problem {
	var ps []problem
	if p.MaxDeletions != nil && *p.MaxDeletions < 0 {
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.prune.maxDeletions", "must be at least 0"})
	}
	if p.MaxPercent != nil && (*p.MaxPercent < 0 || *p.MaxPercent > 100) {
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.prune.maxPercent", "must be between 0 and 100"})
	}
	for i, kind := range p.ProtectedKinds {
		if kind == "" {
			ps = append(ps, required(fmt.Sprintf("spec.prune.protectedKinds[%d]", i))...)
		}
	}
	return ps
}

func validatePatterns(field string, patterns []string) []problem {
	var ps []problem
	for i, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			ps = append(ps, problem{ReasonInvalidDeclaration, fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is not a valid pattern", p)})
		}
	}
	return ps
}

func validatePublish(pub *cairnv1.PublishTarget, registry registryLookup) []problem {
	if pub == nil {
		return nil
	}
	var ps []problem
	if pub.Registry == "" {
		ps = append(ps, required("spec.render.publish.registry")...)
	}
	if pub.Repository == "" {
		ps = append(ps, required("spec.render.publish.repository")...)
	}
	if pub.Keep != nil && *pub.Keep < 1 {
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.render.publish.keep",
			fmt.Sprintf("must be at least 1 (the artifact of the render applied last is always kept), not %d", *pub.Keep)})
	}
	return append(ps, registryReference("spec.render.publish.registry", pub.Registry, registry)...)
}

// registryReference reports a reference to a Registry that is not declared or not valid.
func registryReference(field, name string, registry registryLookup) []problem {
	if name == "" {
		return nil
	}
	switch declared, valid := registry(name); {
	case !declared:
		return []problem{{ReasonDanglingReference, field, fmt.Sprintf("Registry %q is not declared", name)}}
	case !valid:
		return []problem{{ReasonDanglingReference, field, fmt.Sprintf("Registry %q is declared but invalid", name)}}
	}
	return nil
}

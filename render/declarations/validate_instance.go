package declarations

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// digestPattern is a sha256 or sha512 content digest.
var digestPattern = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)

// instanceContext is what an instance is validated against.
type instanceContext struct {
	platform *cairnv1.Platform
	// tenant owns the instance's file, nil for the platform team's.
	tenant *cairnv1.Tenant
	// declared reports whether the instance namespace/name is declared, valid or not,
	// or may be declared in a file that could not be read.
	declared func(id string) bool
	// root is the directory of the repository the declarations were read from (the
	// sync's --path, "." for the repository root), see Options.Root.
	root string
	// cairnNS is cairn's own namespace ("" when unknown), see Options.CairnNamespace.
	cairnNS string
}

// validate checks an instance's spec, its references and its namespace.
func (c instanceContext) validate(mi *cairnv1.ModuleInstance) []problem {
	s := mi.Spec
	ps := c.validateModule(s.Module)
	ps = append(ps, validateValues(s.Values)...)
	ps = append(ps, validateNoValues(s)...)
	ps = append(ps, c.validateDependsOn(mi)...)
	ps = append(ps, oneOf("spec.drift", string(s.Drift), string(cairnv1.DriftCorrect), string(cairnv1.DriftWarn), string(cairnv1.DriftIgnore))...)
	ps = append(ps, positiveDuration("spec.timeout", s.Timeout)...)
	ps = append(ps, optionalName("spec.serviceAccountName", s.ServiceAccountName)...)
	ps = append(ps, namespaceAllowed(c.platform.Spec.Namespaces, "metadata.namespace", mi.Namespace)...)
	ps = append(ps, c.notCairnNamespace(mi.Namespace)...)
	ps = append(ps, validateValuesFrom(s.ValuesFrom)...)
	ps = append(ps, c.validateTenancy(mi)...)
	ps = append(ps, c.validateLimits(mi)...)
	return append(ps, c.validateSecrets(s.Secrets)...)
}

func (c instanceContext) validateModule(m cairnv1.ModuleSource) []problem {
	set := 0
	for _, given := range []bool{m.CUE != nil, m.Chart != nil, m.Local != nil, m.Kustomize != nil, m.Timoni != nil} {
		if given {
			set++
		}
	}
	switch {
	case set != 1:
		return []problem{{ReasonInvalidModule, "spec.module", fmt.Sprintf("exactly one of cue, chart, local, kustomize or timoni must be set, found %d", set)}}
	case m.CUE != nil:
		return c.validateCUE(m.CUE)
	case m.Chart != nil:
		return validateChart(m.Chart)
	case m.Kustomize != nil:
		return validatePath("spec.module.kustomize.path", m.Kustomize.Path)
	case m.Timoni != nil:
		return validateTimoni(m.Timoni)
	}
	return validatePath("spec.module.local.path", m.Local.Path)
}

// validateNoValues refuses values for a kustomize directory: its build takes none.
func validateNoValues(s cairnv1.ModuleInstanceSpec) []problem {
	if s.Module.Kustomize == nil {
		return nil
	}
	const why = "not available for a kustomize directory: a kustomize build takes no values (change it in an overlay: patches, images, replicas, a configMapGenerator)"
	var ps []problem
	if s.Values != nil && !bytes.Equal(bytes.TrimSpace(s.Values.Raw), []byte("{}")) {
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.values", why})
	}
	if len(s.ValuesFrom) > 0 {
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.valuesFrom", why})
	}
	return ps
}

func (c instanceContext) validateCUE(m *cairnv1.CUEModule) []problem {
	var ps []problem
	if m.Path == "" {
		ps = append(ps, problem{ReasonInvalidModule, "spec.module.cue.path", "required"})
	} else if !modulePattern.MatchString(m.Path) {
		ps = append(ps, problem{ReasonInvalidModule, "spec.module.cue.path", fmt.Sprintf("%q is not a module path with its major version, e.g. example.com/modules/podinfo@v0", m.Path)})
	}
	if !semverPattern.MatchString(m.Version) {
		ps = append(ps, problem{ReasonInvalidModule, "spec.module.cue.version", fmt.Sprintf("%q is not an exact version, e.g. v0.4.0", m.Version)})
	}
	if c.platform.Spec.ModuleRegistry == "" {
		ps = append(ps, problem{ReasonDanglingReference, "spec.module.cue", "a CUE module needs the Platform's spec.moduleRegistry, which is not set"})
	}
	return ps
}

// validateChart checks the chart URL without echoing it, since it might carry credentials.
func validateChart(ch *cairnv1.ChartSource) []problem {
	return validateOCI("spec.module.chart", ch.URL, ch.Digest)
}

// validateOCI checks the url and digest fields of an OCI artifact under field.
func validateOCI(field, rawURL, digest string) []problem {
	var ps []problem
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || u.Scheme != "oci" || u.Host == "" || strings.Trim(u.Path, "/") == "" || u.RawQuery != "" || u.Fragment != "":
		ps = append(ps, problem{ReasonInvalidModule, field + ".url", "must be oci://host/repository"})
	case u.User != nil:
		ps = append(ps, problem{ReasonInvalidModule, field + ".url", "must not carry credentials: name a Registry secret instead"})
	}
	if digest != "" && !digestPattern.MatchString(digest) {
		ps = append(ps, problem{ReasonInvalidModule, field + ".digest", fmt.Sprintf("%q is not a sha256 or sha512 digest", digest)})
	}
	return ps
}

// tagPattern is an OCI tag.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// validateTimoni checks a Timoni module: exactly one of path or url; an OCI module
// has a version (a tag, also its moduleVersion tag) or a digest, a directory neither.
func validateTimoni(m *cairnv1.TimoniModule) []problem {
	const field = "spec.module.timoni"
	switch {
	case (m.Path == "") == (m.URL == ""):
		return []problem{{ReasonInvalidModule, field, "exactly one of path (a directory of this repository) or url (oci://host/repository) must be set"}}
	case m.Path != "":
		if m.Version != "" || m.Digest != "" {
			return []problem{{ReasonInvalidModule, field, "version and digest are for a module of url: a module of path renders with moduleVersion 0.0.0-devel"}}
		}
		return validatePath(field+".path", m.Path)
	}
	ps := validateOCI(field, m.URL, m.Digest)
	switch {
	case m.Version == "" && m.Digest == "":
		ps = append(ps, problem{ReasonInvalidModule, field + ".version", "required with url (or a digest): the module version to pull, e.g. 1.2.0"})
	case m.Version != "" && !tagPattern.MatchString(m.Version):
		ps = append(ps, problem{ReasonInvalidModule, field + ".version", fmt.Sprintf("%q is not a valid OCI tag", m.Version)})
	}
	return ps
}

// validatePath checks that a module directory (field) is relative, clean and stays
// inside the repository; a leading "./" and a trailing "/" are allowed, and "." or
// "./" names the root.
func validatePath(field, path string) []problem {
	p := strings.TrimSuffix(strings.TrimPrefix(path, "./"), "/")
	var msg string
	switch {
	case path == "":
		return required(field)
	case p == "" || p == ".":
		return nil
	case strings.HasPrefix(path, "/") || strings.Contains(path, `\`):
		msg = "must be a relative path with forward slashes"
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		msg = "must not contain .."
	case !fs.ValidPath(p):
		msg = "must be a clean path inside the repository"
	default:
		return nil
	}
	return []problem{{ReasonInvalidModule, field, fmt.Sprintf("%q %s", path, msg)}}
}

func validateValues(v *apiextensionsv1.JSON) []problem {
	if v == nil || bytes.HasPrefix(bytes.TrimSpace(v.Raw), []byte("{")) {
		return nil
	}
	return []problem{{ReasonInvalidDeclaration, "spec.values", "must be an object"}}
}

func (c instanceContext) validateDependsOn(mi *cairnv1.ModuleInstance) []problem {
	var ps []problem
	for i, ref := range mi.Spec.DependsOn {
		field := fmt.Sprintf("spec.dependsOn[%d]", i)
		if ref.Name == "" {
			ps = append(ps, required(field+".name")...)
			continue
		}
		if ref.Namespace != "" && len(content.IsDNS1123Label(ref.Namespace)) > 0 {
			ps = append(ps, invalid(field+".namespace", content.IsDNS1123Label(ref.Namespace))...)
			continue
		}
		if id := DependencyIDs(mi)[i]; !c.declared(id) {
			ps = append(ps, problem{ReasonDanglingReference, field, fmt.Sprintf("ModuleInstance %s is not declared", id)})
		}
	}
	return ps
}

// notCairnNamespace refuses an instance in cairn's own namespace, whatever the
// Platform's namespaces.allow says: it would apply next to cairn's keys and read
// cairn's Secrets through valuesFrom.
func (c instanceContext) notCairnNamespace(ns string) []problem {
	if c.cairnNS == "" || ns != c.cairnNS {
		return nil
	}
	return []problem{{ReasonNamespaceDenied, "metadata.namespace", fmt.Sprintf(
		"namespace %q is cairn's own namespace: no instance may live there, whatever the Platform's namespaces.allow says", ns)}}
}

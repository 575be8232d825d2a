package declarations

import (
	"fmt"
	"regexp"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// hostnamePattern is host[:port], as in the CRD.
var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$`)

// validateRegistry checks a Registry's spec.
func validateRegistry(r *cairnv1.Registry) []problem {
	s := r.Spec
	var ps []problem
	switch {
	case s.Hostname == "":
		ps = append(ps, required("spec.hostname")...)
	case !hostnamePattern.MatchString(s.Hostname):
		ps = append(ps, problem{ReasonInvalidDeclaration, "spec.hostname", "must be host[:port], without scheme, path or credentials"})
	}
	if s.SecretRef != nil {
		ps = append(ps, requiredName("spec.secretRef.name", s.SecretRef.Name)...)
	}
	ps = append(ps, optionalName("spec.caConfigMap", s.CAConfigMap)...)
	ps = append(ps, positiveDuration("spec.timeout", s.Timeout)...)
	ps = append(ps, validateVerify(s.Verify)...)
	if s.Signing != nil {
		ps = append(ps, requiredName("spec.signing.keySecretRef.name", s.Signing.KeySecretRef.Name)...)
	}
	return ps
}

func validateVerify(v *cairnv1.RegistryVerify) []problem {
	if v == nil || v.Cosign == nil {
		return nil
	}
	if len(v.Cosign.PublicKeys) == 0 {
		return []problem{{ReasonInvalidDeclaration, "spec.verify.cosign.publicKeys", "at least one key is required"}}
	}
	var ps []problem
	for i, k := range v.Cosign.PublicKeys {
		ps = append(ps, requiredName(fmt.Sprintf("spec.verify.cosign.publicKeys[%d].secretRef.name", i), k.SecretRef.Name)...)
	}
	return ps
}

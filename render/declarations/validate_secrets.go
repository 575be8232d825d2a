package declarations

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// validateSecrets checks the generated Secrets of an instance, including that the
// namespaces they are copied to are allowed.
func (c instanceContext) validateSecrets(secrets []cairnv1.GeneratedSecret) []problem {
	var ps []problem
	seen := map[string]bool{}
	for i, s := range secrets {
		field := fmt.Sprintf("spec.secrets[%d]", i)
		if seen[s.Name] {
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".name", fmt.Sprintf("Secret %q is generated twice", s.Name)})
		}
		seen[s.Name] = true
		ps = append(ps, c.validateSecret(field, s)...)
	}
	return ps
}

func (c instanceContext) validateSecret(field string, s cairnv1.GeneratedSecret) []problem {
	ps := requiredName(field+".name", s.Name)
	if len(s.Data) == 0 && s.TLS == nil {
		ps = append(ps, problem{ReasonInvalidDeclaration, field, "needs data or tls"})
	}
	ps = append(ps, validateSecretData(field+".data", s.Data)...)
	if s.TLS != nil {
		if s.TLS.CommonName == "" {
			ps = append(ps, required(field+".tls.commonName")...)
		}
		ps = append(ps, positiveDuration(field+".tls.validFor", s.TLS.ValidFor)...)
	}
	ps = append(ps, positiveDuration(field+".rotateAfter", s.RotateAfter)...)
	ps = append(ps, secretExclusions(field, s)...)
	for j, ns := range s.ToNamespaces {
		nsField := fmt.Sprintf("%s.toNamespaces[%d]", field, j)
		ps = append(ps, namespaceAllowed(c.platform.Spec.Namespaces, nsField, ns)...)
	}
	return ps
}

func validateSecretData(field string, data map[string]cairnv1.SecretValueSource) []problem {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ps []problem
	for _, k := range keys {
		f := field + "." + k
		ps = append(ps, invalid(f, validation.IsConfigMapKey(k))...)
		r := data[k].Random
		if r == nil {
			ps = append(ps, required(f+".random")...)
			continue
		}
		if r.Length < 1 || r.Length > 4096 {
			ps = append(ps, problem{ReasonInvalidDeclaration, f + ".random.length", "must be between 1 and 4096"})
		}
		ps = append(ps, oneOf(f+".random.encoding", r.Encoding, "alphanumeric", "hex", "base64")...)
	}
	return ps
}

// secretExclusions refuses what contradicts itself: a once Secret that rotates, and
// a data key that a certificate also writes.
func secretExclusions(field string, s cairnv1.GeneratedSecret) []problem {
	var ps []problem
	if s.Once && s.RotateAfter != nil {
		ps = append(ps, problem{ReasonInvalidDeclaration, field + ".rotateAfter", "a once Secret is never generated again: remove once or rotateAfter"})
	}
	if s.TLS == nil {
		return ps
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if _, ok := s.Data[k]; ok {
			ps = append(ps, problem{ReasonInvalidDeclaration, field + ".data." + k, "is written by tls: use another key"})
		}
	}
	return ps
}

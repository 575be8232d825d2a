package secretgen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// Type is the Secret type of a declaration: kubernetes.io/tls when it declares a
// certificate, else Opaque.
func Type(spec cairnv1.GeneratedSecret) corev1.SecretType {
	if spec.TLS != nil {
		return corev1.SecretTypeTLS
	}
	return corev1.SecretTypeOpaque
}

// SpecDigest is the digest of what the values of a declaration are generated from
// (its data generators and certificate), not of once, rotateAfter or toNamespaces:
// a change of it is a change of the generator. It holds no value.
func SpecDigest(spec cairnv1.GeneratedSecret) string {
	b, _ := json.Marshal(struct {
		Data map[string]cairnv1.SecretValueSource `json:"data,omitempty"`
		TLS  *cairnv1.TLSSecretSource             `json:"tls,omitempty"`
	}{spec.Data, spec.TLS})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Keys returns the keys a declaration generates, sorted.
func Keys(spec cairnv1.GeneratedSecret) []string {
	keys := make([]string, 0, len(spec.Data)+3)
	for k := range spec.Data {
		keys = append(keys, k)
	}
	if spec.TLS != nil {
		keys = append(keys, CAKey, CertKey, KeyKey)
	}
	sort.Strings(keys)
	return keys
}

// Missing returns the declared keys that data lacks (an empty value counts as
// absent), sorted.
func Missing(spec cairnv1.GeneratedSecret, data map[string][]byte) []string {
	var out []string
	for _, k := range Keys(spec) {
		if len(data[k]) == 0 {
			out = append(out, k)
		}
	}
	return out
}

// Generate returns fresh values for every key of spec.
func Generate(spec cairnv1.GeneratedSecret, now time.Time) (map[string][]byte, error) {
	return Fill(spec, nil, now)
}

// Fill returns a copy of data with the declared keys it lacks generated; the
// values it holds are never changed. The three TLS keys belong together: when one
// is missing, all three are generated again.
func Fill(spec cairnv1.GeneratedSecret, data map[string][]byte, now time.Time) (map[string][]byte, error) {
	out := make(map[string][]byte, len(data)+len(spec.Data)+3)
	for k, v := range data {
		out[k] = v
	}
	for _, k := range Missing(spec, data) {
		if src, ok := spec.Data[k]; ok {
			v, err := value(k, src)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
	}
	if spec.TLS != nil && tlsMissing(data) {
		if err := fillTLS(out, spec.TLS, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func value(key string, src cairnv1.SecretValueSource) ([]byte, error) {
	if src.Random == nil {
		return nil, fmt.Errorf("failed to generate key %s: it declares no generator", key)
	}
	s, err := Random(int(src.Random.Length), src.Random.Encoding)
	if err != nil {
		return nil, fmt.Errorf("failed to generate key %s: %w", key, err)
	}
	return []byte(s), nil
}

func tlsMissing(data map[string][]byte) bool {
	return len(data[CertKey]) == 0 || len(data[KeyKey]) == 0 || len(data[CAKey]) == 0
}

func fillTLS(out map[string][]byte, spec *cairnv1.TLSSecretSource, now time.Time) error {
	o := TLSOptions{CommonName: spec.CommonName, DNSNames: spec.DNSNames, Now: now}
	if spec.ValidFor != nil {
		o.ValidFor = spec.ValidFor.Duration
	}
	b, err := NewTLS(o)
	if err != nil {
		return err
	}
	out[CertKey], out[KeyKey], out[CAKey] = b.CertPEM, b.KeyPEM, b.CAPEM
	return nil
}

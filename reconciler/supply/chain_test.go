package supply

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/sign"
)

// TestNewLoadsRegistries: a Registry whose credentials, CA bundle or keys cannot be
// read is unusable, with a typed failure that names what is missing and never
// carries the data it read.
func TestNewLoadsRegistries(t *testing.T) {
	_, pubPEM, _ := testKey(t)
	const password = "hunter2-password"
	cluster := fakeSecrets{
		secrets: map[string]*corev1.Secret{
			"creds":   secret("creds", map[string]string{"username": "robot", "password": password}),
			"odd":     secret("odd", map[string]string{"token": password}),
			"keys":    secret("keys", map[string]string{"cosign.pub": string(pubPEM)}),
			"badkeys": secret("badkeys", map[string]string{"cosign.pub": password}),
		},
		configMaps: map[string]*corev1.ConfigMap{"noca": {Data: map[string]string{"other": "x"}}},
	}
	forbidden := fakeSecrets{err: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "creds", nil)}
	for _, tc := range []struct {
		name    string
		secrets SecretSource
		config  []byte
		reg     *cairnv1.Registry
		kind    outcome.Kind
		reason  string
		message string // "" when the Registry loads
	}{
		{name: "anonymous", secrets: cluster, reg: registryOf("r", "r.example")},
		{name: "basic auth", secrets: cluster, reg: registryOf("r", "r.example", withSecret("creds"))},
		{name: "trusted keys", secrets: cluster, reg: registryOf("r", "r.example", withKeys("keys", ""))},
		{name: "keys without a cluster", reg: registryOf("r", "r.example", withKeys("keys", ""))},
		{name: "Secret not found", secrets: cluster, reg: registryOf("r", "r.example", withSecret("gone")),
			kind: outcome.Transient, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: Secret gone not found in cairn's namespace"},
		{name: "Secret forbidden", secrets: forbidden, reg: registryOf("r", "r.example", withSecret("creds")),
			kind: outcome.Transient, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: failed to read Secret creds: Forbidden"},
		{name: "Secret of no known kind", secrets: cluster, reg: registryOf("r", "r.example", withSecret("odd")),
			kind: outcome.Stalled, reason: cairnv1.ReasonUnsupportedSecret, message: "Registry r: Secret odd:"},
		{name: "Secret without a cluster", reg: registryOf("r", "r.example", withSecret("creds")),
			kind: outcome.Stalled, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: Secret creds cannot be read without a cluster"},
		{name: "docker config without a cluster", config: []byte(`{"auths":{}}`), reg: registryOf("r", "r.example", withSecret("creds")),
			kind: outcome.Stalled, reason: cairnv1.ReasonUnsupportedSecret, message: "Registry r: --registry-config:"},
		{name: "ConfigMap not found", secrets: cluster, reg: registryOf("r", "r.example", withCA("gone")),
			kind: outcome.Transient, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: ConfigMap gone not found in cairn's namespace"},
		{name: "ConfigMap without ca.crt", secrets: cluster, reg: registryOf("r", "r.example", withCA("noca")),
			kind: outcome.Stalled, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: ConfigMap noca has no ca.crt"},
		{name: "ConfigMap without a cluster", reg: registryOf("r", "r.example", withCA("noca")),
			kind: outcome.Stalled, reason: cairnv1.ReasonRegistryNotReady, message: "Registry r: ConfigMap noca cannot be read without a cluster"},
		{name: "key missing from its Secret", secrets: cluster, reg: registryOf("r", "r.example", withKeys("keys", "other.pub")),
			kind: outcome.Stalled, reason: cairnv1.ReasonRegistryNotReady, message: `Registry r: Secret keys has no key "other.pub"`},
		{name: "key that is no key", secrets: cluster, reg: registryOf("r", "r.example", withKeys("badkeys", "")),
			kind: outcome.Stalled, reason: cairnv1.ReasonRegistryNotReady, message: `Registry r: Secret badkeys key "cosign.pub":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sc := New(context.Background(), Config{Secrets: tc.secrets, RegistryConfig: tc.config, Verifier: &sign.Verifier{}},
				[]*cairnv1.Registry{tc.reg})
			g.Expect(sc.RegistryFailure("undeclared")).To(BeNil())
			f := sc.RegistryFailure("r")
			if tc.message == "" {
				g.Expect(f).To(BeNil())
				return
			}
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Kind).To(Equal(tc.kind))
			g.Expect(f.Reason).To(Equal(tc.reason))
			g.Expect(f.Error()).To(HavePrefix(tc.message))
			g.Expect(f.Error()).NotTo(ContainSubstring(password))
			mr, mf := sc.ModuleRegistry("r")
			g.Expect(mr).To(BeNil())
			g.Expect(mf).To(BeIdenticalTo(f), "the module registry fails with the Registry's failure")
		})
	}
}

// TestModuleRegistry: the render's view of a Registry carries its credentials and
// asks the Chain to verify only when a policy applies.
func TestModuleRegistry(t *testing.T) {
	_, pubPEM, _ := testKey(t)
	cluster := fakeSecrets{secrets: map[string]*corev1.Secret{
		"creds": secret("creds", map[string]string{"username": "robot", "password": "pw"}),
		"keys":  secret("keys", map[string]string{"cosign.pub": string(pubPEM)}),
	}}
	pub, err := sign.LoadPublicKey(pubPEM)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		name     string
		mode     cairnv1.VerifyMode
		reg      *cairnv1.Registry
		verifyID string
	}{
		{name: "no keys, no mode", reg: registryOf("modules", "m.example", withSecret("creds"))},
		{name: "keys enforce by default", reg: registryOf("modules", "m.example", withKeys("keys", "")), verifyID: "Enforce/" + pub.ID()},
		{name: "Warn", mode: cairnv1.VerifyWarn, reg: registryOf("modules", "m.example", withKeys("keys", "")), verifyID: "Warn/" + pub.ID()},
		{name: "Off", mode: cairnv1.VerifyOff, reg: registryOf("modules", "m.example", withKeys("keys", ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sc := New(context.Background(), Config{Mode: tc.mode, Secrets: cluster, Verifier: &sign.Verifier{}}, []*cairnv1.Registry{tc.reg})
			mr, f := sc.ModuleRegistry("modules")
			g.Expect(f).To(BeNil())
			g.Expect(mr.Host).To(Equal("m.example"))
			g.Expect(mr.VerifyID).To(Equal(tc.verifyID))
			if tc.verifyID == "" {
				g.Expect(mr.Verifier).To(BeNil())
			} else {
				g.Expect(mr.Verifier).To(BeIdenticalTo(sc))
			}
			if tc.reg.Spec.SecretRef != nil {
				g.Expect(mr.Username).To(Equal("robot"))
			}
			none, f := sc.ModuleRegistry("undeclared")
			g.Expect(none).To(BeNil())
			g.Expect(f).To(BeNil())
		})
	}
}

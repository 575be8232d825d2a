package supply

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/sign"
)

// fakeSecrets is a SecretSource of fixed Secrets and ConfigMaps; err, when set, is
// what every read returns.
type fakeSecrets struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
	err        error
}

func (f fakeSecrets) Secret(_ context.Context, name string) (*corev1.Secret, error) {
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f fakeSecrets) ConfigMap(_ context.Context, name string) (*corev1.ConfigMap, error) {
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.configMaps[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// registryOf declares a Registry of host, changed by each of opts.
func registryOf(name, host string, opts ...func(*cairnv1.RegistrySpec)) *cairnv1.Registry {
	reg := &cairnv1.Registry{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: cairnv1.RegistrySpec{Hostname: host, PlainHTTP: true, Timeout: &metav1.Duration{Duration: 10 * time.Second}}}
	for _, o := range opts {
		o(&reg.Spec)
	}
	return reg
}

func withSecret(name string) func(*cairnv1.RegistrySpec) {
	return func(s *cairnv1.RegistrySpec) { s.SecretRef = &cairnv1.LocalObjectReference{Name: name} }
}

func withCA(name string) func(*cairnv1.RegistrySpec) {
	return func(s *cairnv1.RegistrySpec) { s.CAConfigMap = name }
}

func withKeys(secretName, key string) func(*cairnv1.RegistrySpec) {
	return func(s *cairnv1.RegistrySpec) {
		s.Verify = &cairnv1.RegistryVerify{Cosign: &cairnv1.CosignVerify{PublicKeys: []cairnv1.PublicKeySource{
			{SecretRef: cairnv1.SecretKeyReference{Name: secretName, Key: key}}}}}
	}
}

func withSigning(secretName string) func(*cairnv1.RegistrySpec) {
	return func(s *cairnv1.RegistrySpec) {
		s.Signing = &cairnv1.RegistrySigning{KeySecretRef: cairnv1.LocalObjectReference{Name: secretName}}
	}
}

// testRegistry starts go-containerregistry's in-memory registry and returns its
// host and a client of it.
func testRegistry(t *testing.T) (string, *sign.Client) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := sign.NewClient(sign.Endpoint{Host: host, PlainHTTP: true, Timeout: 10 * time.Second})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return host, c
}

// testKeys is a cosign key pair (the private key encrypted with password "pw") as
// PEM, and the private key loaded: made once per test binary, as cosign's scrypt is
// slow on purpose.
var testKeys = sync.OnceValues(func() (testKeyPair, error) {
	priv, pub, err := sign.GenerateKeyPair([]byte("pw"))
	if err != nil {
		return testKeyPair{}, err
	}
	key, err := sign.LoadPrivateKey(priv, []byte("pw"))
	return testKeyPair{privPEM: priv, pubPEM: pub, key: key}, err
})

type testKeyPair struct {
	privPEM, pubPEM []byte
	key             *sign.PrivateKey
}

// testKey returns the test key pair as PEM and the loaded private key.
func testKey(t *testing.T) (privPEM, pubPEM []byte, key *sign.PrivateKey) {
	t.Helper()
	kp, err := testKeys()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return kp.privPEM, kp.pubPEM, kp.key
}

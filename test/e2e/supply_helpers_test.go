package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/sign"
	"cairn.dev/cairn/test/harness"
)

// testRegistryUser and testRegistryPassword guard the registries of the supply-chain
// tests. `make test` fails when the password shows up anywhere in the test output
// (statuses, events, errors and progress are all logged by these tests).
const (
	testRegistryUser     = "cairn-e2e"
	testRegistryPassword = "Supply-Chain-Pa55-Q7x"
	testKeyPassword      = "Key-Pa55-Z3k"
)

// testRegistry is a Debian docker-registry started by a test.
type testRegistry struct {
	*harness.Registry
	opts harness.RegistryOptions
}

// startRegistry starts a Debian docker-registry for one test: with htpasswd auth when
// auth is set, and TLS from a fresh test CA when tls is set.
func startRegistry(t *testing.T, auth, tls bool) *testRegistry {
	t.Helper()
	dir := t.TempDir()
	opts := harness.RegistryOptions{Dir: dir}
	if auth {
		opts.Username, opts.Password = testRegistryUser, testRegistryPassword
	}
	if tls {
		if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o755); err != nil {
			t.Fatal(err)
		}
		pki, err := harness.NewPKI(filepath.Join(dir, "pki"))
		if err != nil {
			t.Fatal(err)
		}
		opts.TLS = pki
	}
	return launchRegistry(t, opts)
}

func launchRegistry(t *testing.T, opts harness.RegistryOptions) *testRegistry {
	t.Helper()
	reg, err := harness.StartRegistry(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	return &testRegistry{Registry: reg, opts: opts}
}

// restartRegistry starts a stopped registry again on its port, with its storage.
func restartRegistry(t *testing.T, reg *testRegistry) *testRegistry {
	t.Helper()
	_, port, _ := strings.Cut(reg.Host, ":")
	opts := reg.opts
	fmt.Sscan(port, &opts.Port)
	return launchRegistry(t, opts)
}

type metav1Condition = metav1.Condition

func digestOf(s string) digest.Digest { return digest.Digest(s) }

// registryClient is a test-side client of reg (cairn's own sign package, used the
// way `cairn push` and `cairn sign` use it).
func registryClient(t *testing.T, reg *testRegistry, auth bool) *sign.Client {
	t.Helper()
	ep := sign.Endpoint{Host: reg.Host, PlainHTTP: reg.CAFile == ""}
	if reg.CAFile != "" {
		ca, err := os.ReadFile(reg.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		ep.CAPEM = ca
	}
	if auth {
		ep.Credentials = &sign.Credentials{Username: testRegistryUser, Password: testRegistryPassword}
	}
	c, err := sign.NewClient(ep)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keyPair is a cosign key pair for the tests.
type keyPair struct {
	private, public []byte
	key             *sign.PrivateKey
}

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	priv, pub, err := sign.GenerateKeyPair([]byte(testKeyPassword))
	if err != nil {
		t.Fatal(err)
	}
	key, err := sign.LoadPrivateKey(priv, []byte(testKeyPassword))
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{private: priv, public: pub, key: key}
}

// chartArchive packages the chart in testdata/charts/<name> at version, with the
// values.yaml greeting replaced when greeting is set.
func chartArchive(t *testing.T, name, version, greeting string) []byte {
	t.Helper()
	ch, err := loader.LoadDir(filepath.Join("..", "..", "examples", "charts", name))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = version
	if greeting != "" {
		// chartutil.Save writes values.yaml from the raw file.
		for _, f := range ch.Raw {
			if f.Name == "values.yaml" {
				f.Data = []byte(strings.Replace(string(f.Data), "greeting: hello", "greeting: "+greeting, 1))
			}
		}
	}
	data, err := sign.PackageChart(ch)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// pushChart pushes a chart archive and signs it with key (nil: unsigned).
func pushChart(t *testing.T, ctx context.Context, c *sign.Client, repo string, tgz []byte, key *sign.PrivateKey) digest.Digest {
	t.Helper()
	desc, _, err := c.PushChart(ctx, repo, tgz)
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		if err := c.Sign(ctx, repo, desc.Digest, key); err != nil {
			t.Fatal(err)
		}
	}
	return desc.Digest
}

// putCairnSecret creates or replaces a Secret in cairn's namespace.
func (e *env) putCairnSecret(name string, typ corev1.SecretType, data map[string][]byte) {
	e.t.Helper()
	e.ensureCairnNamespace()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: name}, Type: typ, Data: data}
	err := e.c.Create(e.ctx, s)
	if apierrors.IsAlreadyExists(err) {
		e.g.Expect(e.c.Delete(e.ctx, s)).To(Succeed())
		err = e.c.Create(e.ctx, s)
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), s) })
}

// putCairnConfigMap creates or replaces a ConfigMap in cairn's namespace.
func (e *env) putCairnConfigMap(name string, data map[string]string) {
	e.t.Helper()
	e.ensureCairnNamespace()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: reconciler.DefaultNamespace, Name: name}, Data: data}
	err := e.c.Create(e.ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		e.g.Expect(e.c.Delete(e.ctx, cm)).To(Succeed())
		err = e.c.Create(e.ctx, cm)
	}
	e.g.Expect(err).NotTo(HaveOccurred())
	e.t.Cleanup(func() { _ = e.c.Delete(context.Background(), cm) })
}

func (e *env) ensureCairnNamespace() {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reconciler.DefaultNamespace}}
	if err := e.c.Create(e.ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

// basicAuthSecret is a kubernetes.io/basic-auth Secret of the test registry user.
func basicAuthData() map[string][]byte {
	return map[string][]byte{"username": []byte(testRegistryUser), "password": []byte(testRegistryPassword)}
}

// dockerConfigData is a .dockerconfigjson for host with the test registry user.
func dockerConfigData(host string) map[string][]byte {
	auth := base64.StdEncoding.EncodeToString([]byte(testRegistryUser + ":" + testRegistryPassword))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	return map[string][]byte{corev1.DockerConfigJsonKey: cfg}
}

// registryYAML declares a Registry.
func registryYAML(name, host string, plainHTTP bool, extra string) string {
	return fmt.Sprintf("apiVersion: cairn.dev/v1alpha1\nkind: Registry\nmetadata:\n  name: %s\nspec:\n  hostname: %q\n  plainHTTP: %t\n%s",
		name, host, plainHTTP, extra)
}

// chartInstanceYAML declares an instance of a chart.
func chartInstanceYAML(name, ns, url, version, values string) string {
	return fmt.Sprintf(`apiVersion: cairn.dev/v1alpha1
kind: ModuleInstance
metadata:
  name: %s
  namespace: %s
spec:
  module:
    chart:
      url: %s
      version: %q
  timeout: 1m
%s`, name, ns, url, version, values)
}

// platformWithVerify is a Platform allowing every namespace with a verify mode and
// extra spec lines.
func platformWithVerify(mode, extra string) string {
	s := platformYAML("")
	if mode != "" {
		s += "  verify:\n    mode: " + mode + "\n"
	}
	return s + extra
}

// instanceCR reads a ModuleInstance.
func (e *env) instanceCR(ns, name string) *cairnv1.ModuleInstance {
	e.t.Helper()
	var mi cairnv1.ModuleInstance
	e.g.Expect(e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, &mi)).To(Succeed())
	return &mi
}

// logEverything logs every status, event and the progress so that the password grep
// of `make test` covers them, and checks here already that no password is in them.
func (e *env) logEverything() {
	e.t.Helper()
	var out bytes.Buffer
	var mis cairnv1.ModuleInstanceList
	_ = e.c.List(e.ctx, &mis)
	var regs cairnv1.RegistryList
	_ = e.c.List(e.ctx, &regs)
	var ps cairnv1.PlatformList
	_ = e.c.List(e.ctx, &ps)
	var events corev1.EventList
	_ = e.c.List(e.ctx, &events)
	for _, v := range []any{mis.Items, regs.Items, ps.Items, events.Items} {
		b, _ := json.Marshal(v)
		out.Write(b)
		out.WriteByte('\n')
	}
	out.WriteString(e.progress.String())
	e.t.Logf("statuses, events and progress:\n%s", out.String())
	for _, secret := range []string{testRegistryPassword, testKeyPassword} {
		e.g.Expect(strings.Contains(out.String(), secret)).To(BeFalse(), "a password leaked into statuses, events or progress")
	}
}

// harnessRegistry names the shared plain-HTTP registry of the test cluster.
func harnessRegistry(host string) *harness.Registry { return &harness.Registry{Host: host} }

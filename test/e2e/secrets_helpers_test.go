package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/render"
)

func (e *env) secret(ns, name string) *corev1.Secret {
	e.t.Helper()
	s := &corev1.Secret{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return nil
	}
	return s
}

// secretValues reads the data of Secrets of the test's namespace, by name and key.
func (e *env) secretValues(names ...string) map[string]map[string]string {
	e.t.Helper()
	out := map[string]map[string]string{}
	for _, n := range names {
		s := e.secret(e.ns, n)
		e.g.Expect(s).NotTo(BeNil(), "Secret %s", n)
		out[n] = map[string]string{}
		for k, v := range s.Data {
			out[n][k] = string(v)
		}
	}
	return out
}

func pick(values map[string]map[string]string, names ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, n := range names {
		out[n] = values[n]
	}
	return out
}

// expectNoValue checks that no generated value appears in the sync result, the
// progress, the status of the instances and the Platform, or a plan.
func (e *env) expectNoValue(res *reconciler.SyncResult, values map[string]map[string]string) {
	e.t.Helper()
	for _, needle := range needles(values) {
		e.expectNowhere(res, needle)
		e.g.Expect(e.progress.String()).NotTo(ContainSubstring(needle))
	}
}

func (e *env) expectNotInPlan(plan *reconciler.Plan, values map[string]map[string]string) {
	e.t.Helper()
	b, err := json.Marshal(plan)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, needle := range needles(values) {
		e.g.Expect(string(b)).NotTo(ContainSubstring(needle))
		e.g.Expect(plan.Markdown()).NotTo(ContainSubstring(needle))
	}
}

// needles are the strings to search outputs for: each value, or for a PEM value the
// first line of its base64 (the header is not secret).
func needles(values map[string]map[string]string) []string {
	var out []string
	for _, keys := range values {
		for _, v := range keys {
			if strings.Contains(v, "-----BEGIN") {
				v = strings.Split(v, "\n")[1]
			}
			out = append(out, v)
		}
	}
	return out
}

// expectCertificate checks a generated TLS Secret: its type and keys, the key
// matches the certificate, and the chain to its CA verifies for every name. It
// returns the certificate.
func (e *env) expectCertificate(s *corev1.Secret, names ...string) *x509.Certificate {
	e.t.Helper()
	e.g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	e.g.Expect(s.Data).To(HaveKey("ca.crt"))
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	e.g.Expect(err).NotTo(HaveOccurred(), "the key matches the certificate")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	e.g.Expect(err).NotTo(HaveOccurred())
	block, _ := pem.Decode(s.Data["ca.crt"])
	e.g.Expect(block).NotTo(BeNil())
	ca, err := x509.ParseCertificate(block.Bytes)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(ca.IsCA).To(BeTrue())
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, n := range names {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: n})
		e.g.Expect(err).NotTo(HaveOccurred(), "the chain verifies for %s", n)
	}
	return leaf
}

// ageSecret sets the generated-at annotation of a Secret of the test's namespace to age ago.
func (e *env) ageSecret(name string, age time.Duration) {
	e.t.Helper()
	s := e.secret(e.ns, name)
	s.Annotations[cairnv1.GeneratedAtAnnotation] = time.Now().Add(-age).UTC().Format(time.RFC3339)
	e.g.Expect(e.c.Update(e.ctx, s)).To(Succeed())
}

func (e *env) plan(repo *gitRepo) *reconciler.Plan {
	e.t.Helper()
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	plan, err := e.engine.Plan(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	return plan
}

func (e *env) driftReport(repo *gitRepo, name string) reconciler.DriftReport {
	e.t.Helper()
	rev, err := e.revision(repo)
	e.g.Expect(err).NotTo(HaveOccurred())
	reports, err := e.engine.CheckDrift(e.ctx, rev)
	e.g.Expect(err).NotTo(HaveOccurred())
	for _, r := range reports {
		if r.Namespace == e.ns && r.Name == name {
			return r
		}
	}
	e.t.Fatalf("no drift report for %s/%s", e.ns, name)
	return reconciler.DriftReport{}
}

func secretPlan(secret, action string) OmegaMatcher {
	return And(HaveField("Secret", secret), HaveField("Action", action))
}

func (e *env) createNamespaces(names ...string) {
	e.t.Helper()
	for _, n := range names {
		e.g.Expect(e.c.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}
	e.deleteNamespacesAtEnd(names...)
}

// restartEngine replaces the engine by a new one, as a restart of cairn would, and
// returns the buffer its logs (every level) go to.
func (e *env) restartEngine() *lockedBuffer {
	e.t.Helper()
	cluster, err := reconciler.NewCluster(e.cluster.RESTConfig)
	e.g.Expect(err).NotTo(HaveOccurred())
	opts := reconciler.DefaultOptions()
	opts.RenderCacheDir = e.t.TempDir()
	opts.DefaultTimeout = time.Minute
	opts.Progress = e.progress
	logs := &lockedBuffer{}
	opts.Log = funcr.New(func(prefix, args string) { fmt.Fprintln(logs, prefix, args) }, funcr.Options{Verbosity: 10})
	e.engine = reconciler.New(cluster, render.NewRenderer(), opts)
	return logs
}

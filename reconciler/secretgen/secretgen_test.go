package secretgen

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

func TestRandom(t *testing.T) {
	for _, tc := range []struct {
		encoding string
		length   int
		alphabet string
	}{
		{"", 32, `^[A-Za-z0-9]+$`},
		{Alphanumeric, 1, `^[A-Za-z0-9]+$`},
		{Alphanumeric, 4096, `^[A-Za-z0-9]+$`},
		{Hex, 7, `^[0-9a-f]+$`},
		{Hex, 64, `^[0-9a-f]+$`},
		{Base64, 1, `^[A-Za-z0-9+/]+$`},
		{Base64, 43, `^[A-Za-z0-9+/]+$`},
		{Base64, 44, `^[A-Za-z0-9+/]+$`},
	} {
		t.Run(tc.encoding, func(t *testing.T) {
			g := NewWithT(t)
			a, err := Random(tc.length, tc.encoding)
			g.Expect(err).NotTo(HaveOccurred())
			b, _ := Random(tc.length, tc.encoding)
			g.Expect(a).To(HaveLen(tc.length))
			g.Expect(a).To(MatchRegexp(tc.alphabet))
			if tc.length >= 16 {
				g.Expect(a).NotTo(Equal(b), "two values must differ")
			}
		})
	}
}

func TestRandomRejects(t *testing.T) {
	g := NewWithT(t)
	_, err := Random(0, Hex)
	g.Expect(err).To(MatchError(ContainSubstring("length 0 is not positive")))
	_, err = Random(8, "base32")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown encoding "base32"`)))
}

// TestRandomAlphanumericUniform draws many characters: every one of the 62 appears,
// none far from its share (a modulo bias would favour the first 8 by about 25 %).
func TestRandomAlphanumericUniform(t *testing.T) {
	g := NewWithT(t)
	s, err := Random(62*2000, Alphanumeric)
	g.Expect(err).NotTo(HaveOccurred())
	counts := map[rune]int{}
	for _, c := range s {
		counts[c]++
	}
	g.Expect(counts).To(HaveLen(62))
	for c, n := range counts {
		g.Expect(n).To(BeNumerically("~", 2000, 300), "character %q", c)
	}
}

func TestNewTLS(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	b, err := NewTLS(TLSOptions{CommonName: "webhook.team-a.svc",
		DNSNames: []string{"webhook.team-a.svc", "webhook", "10.0.0.1"}, ValidFor: 48 * time.Hour, Now: now})
	g.Expect(err).NotTo(HaveOccurred())

	pair, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred(), "the key matches the certificate")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.Subject.CommonName).To(Equal("webhook.team-a.svc"))
	g.Expect(leaf.DNSNames).To(Equal([]string{"webhook.team-a.svc", "webhook"}))
	g.Expect(leaf.IPAddresses[0].String()).To(Equal("10.0.0.1"))
	g.Expect(leaf.IsCA).To(BeFalse())
	g.Expect(leaf.NotAfter).To(BeTemporally("~", now.Add(48*time.Hour), time.Second))

	ca := parseCert(g, b.CAPEM)
	g.Expect(ca.IsCA).To(BeTrue())
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"webhook.team-a.svc", "webhook", "10.0.0.1"} {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now})
		g.Expect(err).NotTo(HaveOccurred(), "the chain verifies for %s", name)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.svc", CurrentTime: now})
	g.Expect(err).To(HaveOccurred())
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "webhook", CurrentTime: now.Add(49 * time.Hour)})
	g.Expect(err).To(HaveOccurred(), "expired after validFor")
}

// TestNewTLSUniqueCA: each bundle has a CA of its own; one CA never verifies
// another bundle's certificate.
func TestNewTLSUniqueCA(t *testing.T) {
	g := NewWithT(t)
	a, err := NewTLS(TLSOptions{CommonName: "a.svc"})
	g.Expect(err).NotTo(HaveOccurred())
	b, err := NewTLS(TLSOptions{CommonName: "a.svc"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.CAPEM).NotTo(Equal(b.CAPEM))
	roots := x509.NewCertPool()
	roots.AddCert(parseCert(g, a.CAPEM))
	_, err = parseCert(g, b.CertPEM).Verify(x509.VerifyOptions{Roots: roots, DNSName: "a.svc"})
	g.Expect(err).To(HaveOccurred())
	leaf := parseCert(g, a.CertPEM)
	g.Expect(leaf.DNSNames).To(Equal([]string{"a.svc"}), "the common name is the SAN when none is declared")
	g.Expect(leaf.NotAfter.Sub(leaf.NotBefore)).To(BeNumerically("~", DefaultValidFor+backdate, time.Minute))
}

func parseCert(g *WithT, p []byte) *x509.Certificate {
	block, _ := pem.Decode(p)
	g.Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func TestFill(t *testing.T) {
	spec := cairnv1.GeneratedSecret{Name: "s", Data: map[string]cairnv1.SecretValueSource{
		"password": {Random: &cairnv1.RandomSource{Length: 12}},
		"token":    {Random: &cairnv1.RandomSource{Length: 10, Encoding: Hex}},
	}, TLS: &cairnv1.TLSSecretSource{CommonName: "x.svc"}}
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		kept    []string
		missing []string
	}{
		{name: "empty", missing: []string{CAKey, "password", CertKey, KeyKey, "token"}},
		{name: "one data key", data: map[string][]byte{"password": []byte("kept"), "extra": []byte("x")},
			kept: []string{"password", "extra"}, missing: []string{CAKey, CertKey, KeyKey, "token"}},
		{name: "one TLS key missing regenerates all three",
			data: map[string][]byte{"password": []byte("p"), "token": []byte("t"), CertKey: []byte("c"), KeyKey: []byte("k")},
			kept: []string{"password", "token"}, missing: []string{CAKey}},
		{name: "empty value is absent", data: map[string][]byte{"password": {}}, missing: []string{CAKey, "password", CertKey, KeyKey, "token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Missing(spec, tc.data)).To(Equal(tc.missing))
			out, err := Fill(spec, tc.data, time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(Missing(spec, out)).To(BeEmpty())
			for _, k := range tc.kept {
				g.Expect(out[k]).To(Equal(tc.data[k]), "key %s is kept", k)
			}
			if tc.data["token"] == nil {
				g.Expect(regexp.MustCompile(`^[0-9a-f]{10}$`).Match(out["token"])).To(BeTrue())
			}
			_, err = tls.X509KeyPair(out[CertKey], out[KeyKey])
			g.Expect(err).NotTo(HaveOccurred())
		})
	}
}

func TestSpecDigestAndType(t *testing.T) {
	g := NewWithT(t)
	base := cairnv1.GeneratedSecret{Name: "s", Data: map[string]cairnv1.SecretValueSource{
		"k": {Random: &cairnv1.RandomSource{Length: 12}}}}
	same := base
	same.Once, same.ToNamespaces = true, []string{"other"}
	same.RotateAfter = &metav1.Duration{Duration: time.Hour}
	g.Expect(SpecDigest(same)).To(Equal(SpecDigest(base)), "once, rotateAfter and copies are not the generator")
	longer := cairnv1.GeneratedSecret{Name: "s", Data: map[string]cairnv1.SecretValueSource{
		"k": {Random: &cairnv1.RandomSource{Length: 13}}}}
	g.Expect(SpecDigest(longer)).NotTo(Equal(SpecDigest(base)))
	g.Expect(Type(base)).To(Equal(corev1.SecretTypeOpaque))
	g.Expect(Type(cairnv1.GeneratedSecret{TLS: &cairnv1.TLSSecretSource{CommonName: "a"}})).To(Equal(corev1.SecretTypeTLS))
}

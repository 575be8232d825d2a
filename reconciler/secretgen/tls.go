package secretgen

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // the subject key identifier of RFC 5280 4.2.1.2, not a signature
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultValidFor is the validity of a certificate whose declaration sets none.
const DefaultValidFor = 365 * 24 * time.Hour

// backdate is how far before now a certificate starts to be valid, so that a
// peer whose clock is a little behind accepts it.
const backdate = 5 * time.Minute

// Keys of a generated TLS Secret (those of a kubernetes.io/tls Secret, plus the CA).
const (
	CertKey = "tls.crt"
	KeyKey  = "tls.key"
	CAKey   = "ca.crt"
)

// TLSOptions describe a leaf certificate.
type TLSOptions struct {
	CommonName string
	// DNSNames are the subject alternative names; entries that parse as IP
	// addresses become IP SANs. Empty: the common name, when it is a DNS name.
	DNSNames []string
	// ValidFor is the validity of the CA and the certificate (0: DefaultValidFor).
	ValidFor time.Duration
	// Now is the start of the validity (zero: time.Now()).
	Now time.Time
}

// TLSBundle is a leaf certificate, its private key and the CA that signed it, in PEM.
type TLSBundle struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// NewTLS generates a CA of its own (ECDSA P-256; its private key is discarded once
// it has signed, so nothing else can ever be signed by it) and a leaf certificate
// for server and client authentication signed by that CA, with a fresh ECDSA P-256
// key encoded as PKCS #8.
func NewTLS(o TLSOptions) (*TLSBundle, error) {
	if o.CommonName == "" {
		return nil, fmt.Errorf("failed to generate a certificate: the common name is empty")
	}
	if o.ValidFor <= 0 {
		o.ValidFor = DefaultValidFor
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	caKey, caCert, err := newCA(o)
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a certificate key: %w", err)
	}
	tmpl, err := leafTemplate(o, caCert)
	if err != nil {
		return nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the certificate key: %w", err)
	}
	return &TLSBundle{
		CertPEM: pemBlock("CERTIFICATE", leafDER),
		KeyPEM:  pemBlock("PRIVATE KEY", keyDER),
		CAPEM:   pemBlock("CERTIFICATE", caCert.Raw),
	}, nil
}

func newCA(o TLSOptions) (crypto.Signer, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to generate a CA key: %w", err)
	}
	tmpl, err := baseTemplate(pkix.Name{CommonName: o.CommonName + " CA", Organization: []string{"cairn"}}, o, &key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to sign the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read the CA: %w", err)
	}
	return key, cert, nil
}

func leafTemplate(o TLSOptions, ca *x509.Certificate) (*x509.Certificate, error) {
	tmpl, err := baseTemplate(pkix.Name{CommonName: o.CommonName}, o, nil)
	if err != nil {
		return nil, err
	}
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.AuthorityKeyId = ca.SubjectKeyId
	tmpl.DNSNames, tmpl.IPAddresses = subjectAltNames(o)
	return tmpl, nil
}

func baseTemplate(subject pkix.Name, o TLSOptions, pub *ecdsa.PublicKey) (*x509.Certificate, error) {
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: o.Now.Add(-backdate), NotAfter: o.Now.Add(o.ValidFor),
	}
	if pub != nil {
		tmpl.SubjectKeyId = keyID(pub)
	}
	return tmpl, nil
}

// subjectAltNames splits the declared names into DNS and IP SANs; with none
// declared, the common name is the DNS SAN when it is a DNS name (clients match
// SANs only, never the common name).
func subjectAltNames(o TLSOptions) ([]string, []net.IP) {
	names := o.DNSNames
	if len(names) == 0 && len(validation.IsDNS1123Subdomain(o.CommonName)) == 0 {
		names = []string{o.CommonName}
	}
	var dns []string
	var ips []net.IP
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
			continue
		}
		dns = append(dns, n)
	}
	return dns, ips
}

func serialNumber() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("failed to generate a serial number: %w", err)
	}
	return serial, nil
}

func keyID(pub *ecdsa.PublicKey) []byte {
	b, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha1.Sum(b) //nolint:gosec // see the import
	return sum[:]
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

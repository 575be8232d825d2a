package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for a demo cluster left running.
const certValidity = 365 * 24 * time.Hour

// PKI is a throw-away certificate authority kept in a directory: ca.crt,
// ca.key and every pair issued with WritePair.
type PKI struct {
	Dir    string
	CAFile string
	CAPEM  []byte
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// keyPair is one issued certificate with its key, PEM-encoded.
type keyPair struct {
	CertPEM, KeyPEM []byte
}

// NewPKI creates a certificate authority in dir.
func NewPKI(dir string) (*PKI, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate the CA key: %w", err)
	}
	tmpl := certTemplate("cairn-harness-ca")
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the CA certificate: %w", err)
	}
	p := &PKI{Dir: dir, CAPEM: pemBlock("CERTIFICATE", der), ca: ca, caKey: key}
	pair, err := newKeyPairPEM(p.CAPEM, key)
	if err != nil {
		return nil, err
	}
	p.CAFile, _, err = p.writePair("ca", pair)
	return p, err
}

// ServingPair issues a server certificate for 127.0.0.1 and localhost plus
// the given DNS names, writes it as name.crt and name.key and returns the paths.
func (p *PKI) ServingPair(name string, dnsNames ...string) (certFile, keyFile string, err error) {
	tmpl := certTemplate(name)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}
	tmpl.DNSNames = append([]string{"localhost"}, dnsNames...)
	pair, err := p.issue(tmpl)
	if err != nil {
		return "", "", err
	}
	return p.writePair(name, pair)
}

// clientPair issues a client certificate for user cn in groups orgs.
func (p *PKI) clientPair(cn string, orgs ...string) (keyPair, error) {
	tmpl := certTemplate(cn)
	tmpl.Subject.Organization = orgs
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return p.issue(tmpl)
}

func (p *PKI) issue(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to generate a key for %s: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to sign the certificate of %s: %w", tmpl.Subject.CommonName, err)
	}
	return newKeyPairPEM(pemBlock("CERTIFICATE", der), key)
}

func (p *PKI) writePair(name string, pair keyPair) (certFile, keyFile string, err error) {
	certFile = filepath.Join(p.Dir, name+".crt")
	keyFile = filepath.Join(p.Dir, name+".key")
	if err := writeFiles(map[string][]byte{certFile: pair.CertPEM, keyFile: pair.KeyPEM}); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// writeServiceAccountKey writes the service-account signing key (sa.key) and
// its public half (sa.pub) into dir.
func writeServiceAccountKey(dir string) (pubFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("failed to generate the service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("failed to encode the service-account public key: %w", err)
	}
	pair, err := newKeyPairPEM(pemBlock("PUBLIC KEY", pub), key)
	if err != nil {
		return "", "", err
	}
	pubFile, keyFile = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	return pubFile, keyFile, writeFiles(map[string][]byte{pubFile: pair.CertPEM, keyFile: pair.KeyPEM})
}

func newKeyPairPEM(certPEM []byte, key *ecdsa.PrivateKey) (keyPair, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("failed to encode a private key: %w", err)
	}
	return keyPair{CertPEM: certPEM, KeyPEM: pemBlock("EC PRIVATE KEY", der)}, nil
}

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
	}
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("failed to write %s: %w", path, err)
		}
	}
	return nil
}

package sign

import (
	"encoding/pem"
	"fmt"
	"regexp"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/sigstore/cosign/v2/pkg/cosign"
)

func TestGenerateKeyPair(t *testing.T) {
	g := NewWithT(t)
	password := []byte("correct horse battery")
	privPEM, pubPEM, err := GenerateKeyPair(password)
	g.Expect(err).NotTo(HaveOccurred())

	block, _ := pem.Decode(privPEM)
	g.Expect(block).NotTo(BeNil())
	g.Expect(block.Type).To(Equal("ENCRYPTED SIGSTORE PRIVATE KEY"))

	// cosign itself loads it with the right password only.
	_, err = cosign.LoadPrivateKey(privPEM, password, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cosign.LoadPrivateKey(privPEM, []byte("wrong"), nil)
	g.Expect(err).To(HaveOccurred())

	key, err := LoadPrivateKey(privPEM, password)
	g.Expect(err).NotTo(HaveOccurred())
	pub, err := LoadPublicKey(pubPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pub.ID()).To(MatchRegexp(`^[0-9a-f]{12}$`))
	g.Expect(key.Public().ID()).To(Equal(pub.ID()))

	_, otherPub := testKey(t, 0)
	g.Expect(otherPub.ID()).NotTo(Equal(pub.ID()))
}

func TestLoadKeyErrors(t *testing.T) {
	g := NewWithT(t)
	password := []byte("correct horse battery")
	privPEM, _, err := GenerateKeyPair(password)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = LoadPrivateKey(privPEM, []byte("wrong horse battery"))
	g.Expect(Reason(err)).To(Equal(ReasonInvalidKey))
	g.Expect(err.Error()).NotTo(ContainSubstring("horse"))

	_, err = LoadPrivateKey([]byte("garbage"), password)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidKey))

	_, err = LoadPublicKey(privPEM)
	g.Expect(Reason(err)).To(Equal(ReasonInvalidKey))

	// Printing a key shows its ID, not its material.
	key, err := LoadPrivateKey(privPEM, password)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range []string{fmt.Sprint(key), fmt.Sprintf("%+v", key), fmt.Sprintf("%#v", key), fmt.Sprintf("%v", *key)} {
		g.Expect(s).To(MatchRegexp(`^PrivateKey\([0-9a-f]{12}\)$`))
	}
	g.Expect(regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(key.Public().ID())).To(BeTrue())
}

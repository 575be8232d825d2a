package sign

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

func TestVerifierCachesSuccessesOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := newTestRegistry(t, nil)
	c := reg.client(t, nil)
	key, pub := testKey(t, 0)
	_, otherPub := testKey(t, 1)
	a := pushFiles(t, c, "rendered/x", "a", "A")
	b := pushFiles(t, c, "rendered/x", "b", "B")
	g.Expect(c.Sign(ctx, "rendered/x", a.Digest, key)).To(Succeed())
	var v Verifier

	before := reg.requests.Load()
	res, cached, err := v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached).To(BeFalse())
	g.Expect(res.Verified).To(BeTrue())
	g.Expect(reg.requests.Load()).To(BeNumerically(">", before))

	before = reg.requests.Load()
	res, cached, err = v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached).To(BeTrue())
	g.Expect(res.KeyID).To(Equal(pub.ID()))
	g.Expect(reg.requests.Load()).To(Equal(before), "a cached result makes no request")

	// Another key set is another entry, even when it contains the key.
	_, cached, err = v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{otherPub, pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached).To(BeFalse())
	_, cached, _ = v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{pub, otherPub})
	g.Expect(cached).To(BeTrue(), "the order of the keys does not matter")

	// A new digest is verified afresh; its failure is not cached.
	before = reg.requests.Load()
	_, cached, err = v.VerifyCached(ctx, c, "rendered/x", b.Digest, []*PublicKey{pub})
	g.Expect(Reason(err)).To(Equal(ReasonSignatureMissing))
	g.Expect(cached).To(BeFalse())
	g.Expect(reg.requests.Load()).To(BeNumerically(">", before))

	g.Expect(c.Sign(ctx, "rendered/x", b.Digest, key)).To(Succeed())
	res, cached, err = v.VerifyCached(ctx, c, "rendered/x", b.Digest, []*PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached).To(BeFalse())
	g.Expect(res.Verified).To(BeTrue())

	// Another host is another entry.
	other := newTestRegistry(t, nil).client(t, nil)
	_, cached, err = v.VerifyCached(ctx, other, "rendered/x", a.Digest, []*PublicKey{pub})
	g.Expect(cached).To(BeFalse())
	g.Expect(Reason(err)).To(Equal(ReasonSignatureMissing))
}

func TestVerifierConcurrentUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := newTestRegistry(t, nil).client(t, nil)
	key, pub := testKey(t, 0)
	a := pushFiles(t, c, "rendered/x", "a", "A")
	g.Expect(c.Sign(ctx, "rendered/x", a.Digest, key)).To(Succeed())
	var v Verifier
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, _, err := v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{pub})
			errs <- err
		}()
	}
	for range 8 {
		g.Expect(<-errs).NotTo(HaveOccurred())
	}
	_, cached, err := v.VerifyCached(ctx, c, "rendered/x", a.Digest, []*PublicKey{pub})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached).To(BeTrue())
}

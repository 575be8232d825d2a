package dashboard

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestTTLCache(t *testing.T) {
	g := NewWithT(t)
	c := newTTLCache[string, int](2, 50*time.Millisecond)
	c.put("a", 1)
	c.put("b", 2)
	_, _ = c.get("a") // a is now the most recent
	c.put("c", 3)     // evicts b, the least recently used
	_, ok := c.get("b")
	g.Expect(ok).To(BeFalse())
	v, ok := c.get("a")
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal(1))
	time.Sleep(60 * time.Millisecond)
	_, ok = c.get("a")
	g.Expect(ok).To(BeFalse(), "expired")
}

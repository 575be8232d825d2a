package reconciler

import (
	"math"
	"runtime/debug"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDefaultConcurrencyFollowsTheMemoryLimit: renders at once at about 16 MiB each
// and applies at once at about 4 MiB each, between 4 and 64, under GOMEMLIMIT (1 GiB
// without it), so that the controller's 512 MiB applies as many instances at once as
// the CLI does.
func TestDefaultConcurrencyFollowsTheMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tc := range []struct {
		limit           int64
		render, applies int
	}{
		{math.MaxInt64, 64, 64},
		{512 << 20, 32, 64},
		{128 << 20, 8, 32},
		{16 << 20, 4, 4},
	} {
		debug.SetMemoryLimit(tc.limit)
		g := NewWithT(t)
		o := DefaultOptions()
		g.Expect(o.Concurrency).To(Equal(tc.render), "renders at once under %d", tc.limit)
		g.Expect(o.ApplyConcurrency).To(Equal(tc.applies), "applies at once under %d", tc.limit)
	}
}

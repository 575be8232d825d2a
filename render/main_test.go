package render

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the render worker of its Renderers.
func TestMain(m *testing.M) {
	ServeWorkerIfRequested()
	os.Exit(m.Run())
}

// newInProcessRenderer is a Renderer that evaluates in the test process, for
// tests of what it keeps between renders.
func newInProcessRenderer() *Renderer {
	return NewRendererWithOptions(RendererOptions{InProcess: true})
}

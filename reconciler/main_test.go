package reconciler

import (
	"os"
	"testing"

	"cairn.dev/cairn/render"
)

// TestMain lets the test binary serve as the render worker of its Renderers.
func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	os.Exit(m.Run())
}

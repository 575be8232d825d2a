package e2e

import (
	"testing"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/test/harness"
)

// TestMain shares one local cluster among the tests; the test binary is also the
// render worker of the engines' Renderers.
func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	harness.Main(m, harness.DefaultOptions())
}

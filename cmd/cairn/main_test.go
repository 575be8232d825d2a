package main

import (
	"testing"

	"cairn.dev/cairn/render"
	"cairn.dev/cairn/test/harness"
)

// TestMain shares one local cluster among the command tests that need one; it is
// started on the first harness.ForTest call, so the offline tests pay nothing. The test
// binary is also the render worker of the commands' Renderers.
func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	harness.Main(m, harness.DefaultOptions())
}

package apply

import (
	"testing"
	"time"

	"cairn.dev/cairn/test/harness"
)

// TestMain shares one local control plane among the tests that need a real API
// server (apiserver_test.go); it is started on the first harness.ForTest call, so a
// run of the fake-client tests alone (-run) pays nothing. Full: the controllers and a
// kwok node make Deployments Available and finish Namespace deletions.
func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Full: true, StartTimeout: 2 * time.Minute})
}

package e2e

import (
	"testing"

	"cairn.dev/cairn/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m, harness.DefaultOptions()) }

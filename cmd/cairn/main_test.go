package main

import (
	"testing"

	"cairn.dev/cairn/test/harness"
)

// TestMain shares one local cluster among the command tests that need one; it is
// started on the first harness.ForTest call, so the offline tests pay nothing.
func TestMain(m *testing.M) { harness.Main(m, harness.DefaultOptions()) }

// Package bench holds cairn's benchmarks (B1–B6 of TESTING.md) as tests named
// TestB<n>...: each runs a workload against cairn and against a baseline tool
// in the same run, and prints a Markdown table of the figures and their ratio.
//
// `make bench` runs them at full size (CAIRN_BENCH=1) with the baseline CLIs
// built by hack/bench-tools.sh, prints the tables and writes them to
// results/<name>.md (git-ignored). Without CAIRN_BENCH=1 the same tests run
// a tiny workload that still checks the outputs, so `go test ./...` stays
// fast and the benchmarks cannot rot.
package bench

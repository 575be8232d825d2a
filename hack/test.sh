#!/usr/bin/env bash
# make test: every test against the real parts, with the full verbose output kept
# in $TEST_LOG (go test -json), a go-test-like summary printed, and the whole output
# searched for the passwords the supply-chain tests use: no status, event, log line,
# error or plan may carry them.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
TEST_TIMEOUT=${TEST_TIMEOUT:-60m}
TEST_LOG=${TEST_LOG:-test/results/test.json}
mkdir -p "$(dirname "$TEST_LOG")"

# Nothing built and no key is tracked: a file over 2 MB outside testdata/ fails here.
$GO run ./hack/repocheck || exit 1

# The one-time builds first, outside any test's deadline: the Kubernetes binaries,
# Gitea, Flux's source- and kustomize-controller (B6 runs them beside cairn, a small
# fleet in a quick run) and the baseline CLIs (helm v3.22.0 for render's golden files,
# cue v0.17.1 for the Timoni renders compared with cue export), cached by
# version (make test has run hack/prereqs.sh before this).
bin=$(hack/build-kube.sh) || exit 1
gitea=$(hack/build-gitea.sh) || exit 1
flux=$(hack/build-flux.sh) || exit 1
tools=$(hack/bench-tools.sh) || exit 1
# -count=1: no cached results. Tests that build and run the cairn binary or `make
# demo` (test/demo, test/bench, the e2e tests of the CLI) would otherwise pass from
# the cache after a change to what they run, which go test cannot see.
CAIRN_KUBE_BIN=$bin CAIRN_GITEA_DIR=$gitea CAIRN_FLUX_DIR=$flux CAIRN_HELM=$tools/helm CAIRN_CUE=$tools/cue $GO test -count=1 -json -timeout="$TEST_TIMEOUT" ./... >"$TEST_LOG" 2>&1
rc=$?
$GO run ./hack/testreport <"$TEST_LOG" || rc=1

# The test credentials (test/e2e/supply_helpers_test.go, hack/image), plain and as docker-config base64.
secrets=(Supply-Chain-Pa55-Q7x Key-Pa55-Z3k Image-Key-Pa55-W4m Image-Registry-Pa55-R8t "$(printf 'cairn-e2e:Supply-Chain-Pa55-Q7x' | base64)")
for s in "${secrets[@]}"; do
  if grep -F -q -- "$s" "$TEST_LOG"; then
    echo "FAIL: a test credential appears in the test output ($TEST_LOG):" >&2
    grep -F -n -- "$s" "$TEST_LOG" | cut -c1-300 | head -5 >&2
    rc=1
  fi
done
if ! grep -q '"Test":"TestSignedChartFromAuthenticatedRegistry"' "$TEST_LOG"; then
  echo "FAIL: the supply-chain tests did not run, so the credential check proves nothing" >&2
  rc=1
fi
exit $rc

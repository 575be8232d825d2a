#!/usr/bin/env bash
# Writes the golden files of render's Helm fidelity tests (render/chart_helm_test.go):
# for each chart under render/testdata/helm/charts, the output of `helm template` of
# Helm v3.22.0 as <chart>.yaml, or, for a chart Helm refuses, its error as <chart>.err.
# The release is web in namespace team-a with Kubernetes v1.37.0, as render's chart
# tests render it, and the CRDs are included.
#
# Usage: hack/helm-golden.sh [OUTDIR]   (default render/testdata/helm/golden)
# The helm binary is $CAIRN_HELM, else the one hack/bench-tools.sh builds (cached by
# version).
set -euo pipefail
cd "$(dirname "$0")/.."
want=v3.22.0
helm=${CAIRN_HELM:-}
if [ -z "$helm" ]; then
  helm=$(hack/bench-tools.sh)/helm
fi
# A helm built by go install (as hack/bench-tools.sh builds it) reports only its minor.
got=$("$helm" version --template '{{.Version}}')
if [ "$got" != "$want" ] && [ "$got" != "${want%.*}" ]; then
  echo "$helm is helm $got, not $want" >&2
  exit 1
fi
out=${1:-render/testdata/helm/golden}
mkdir -p "$out"
# No repositories, plugins or caches of the user's.
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
export HELM_CACHE_HOME=$home/cache HELM_CONFIG_HOME=$home/config HELM_DATA_HOME=$home/data
for dir in render/testdata/helm/charts/*/; do
  name=$(basename "$dir")
  rm -f "$out/$name.yaml" "$out/$name.err"
  if "$helm" template web "$dir" --namespace team-a --kube-version v1.37.0 --include-crds \
    >"$out/$name.yaml" 2>"$out/$name.err"; then
    rm "$out/$name.err"
  else
    rm "$out/$name.yaml"
  fi
done

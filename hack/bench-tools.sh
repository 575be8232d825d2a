#!/usr/bin/env bash
# Builds the baseline CLIs the benchmarks under test/bench compare against
# (`go install` from the module proxy) into a cache keyed by version, outside
# the checkout, and prints the bin directory on stdout. Reused when present.
#
# Layout: $CACHE/<tool>-<version>/<tool>, and $CACHE/bin/<tool> linking to the
# pinned version, so that changing a version builds it once beside the old one.
#
# Usage: hack/bench-tools.sh            build what is missing, print the bin dir
#        hack/bench-tools.sh --cached   print the bin dir only if every tool is
#                                       already built (exit 1 otherwise, build nothing)
set -euo pipefail
CUE_VERSION=${CUE_VERSION:-v0.17.1}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
COSIGN_VERSION=${COSIGN_VERSION:-v2.6.5}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cairn/tools
BIN=$CACHE/bin

# name version package
tools=(
  "cue $CUE_VERSION cuelang.org/go/cmd/cue"
  "helm $HELM_VERSION helm.sh/helm/v3/cmd/helm"
  "cosign $COSIGN_VERSION github.com/sigstore/cosign/v2/cmd/cosign"
)

cached_only=0
case "${1:-}" in
  --cached) cached_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--cached]" >&2; exit 2 ;;
esac

mkdir -p "$BIN"
for t in "${tools[@]}"; do
  read -r name version pkg <<<"$t"
  dir=$CACHE/$name-$version
  if [ ! -x "$dir/$name" ]; then
    [ $cached_only = 1 ] && exit 1
    echo "building $name $version" >&2
    work=$(mktemp -d "$CACHE/build-$name.XXXXXX")
    # Outside any module, so the checkout's go.mod does not take part.
    (cd "$work" && GOBIN=$work/bin GOFLAGS=-buildvcs=false go install "$pkg@$version" >&2)
    mkdir -p "$dir"
    mv "$work/bin/$name" "$dir/$name"
    rm -rf "$work"
  fi
  [ "$(readlink "$BIN/$name" 2>/dev/null)" = "$dir/$name" ] || ln -sfn "$dir/$name" "$BIN/$name"
done
echo "$BIN"

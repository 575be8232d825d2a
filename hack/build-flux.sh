#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller (the two that the
# fleet benchmark runs beside cairn, test/bench) from the Go module proxy into
# a cache keyed by their versions, outside the checkout, and extracts their
# CRDs from the module zips. Reused when present. Prints the directory on
# stdout: bin/source-controller, bin/kustomize-controller and crds/*.yaml.
# Progress goes to stderr. Concurrent runs wait for one build (flock on
# $CACHE/build-flux.lock).
#
# Each controller is built in a scratch module that requires that version and
# copies the non-local replace lines of its own go.mod (a local one, such as
# `…/api => ./api`, names a directory the module zip lays out differently, and
# the proxy serves the api module at the same version). Modules the proxy
# does not serve at the version a controller asks for are replaced by one it
# serves, listed in *_UPGRADES ("module version" pairs). `go mod tidy -e` goes
# on past modules that only the controllers' tests import and the proxy does
# not serve (github.com/fluxcd/pkg/gittestserver v0.25.4, helmtestserver
# v0.37.2 for source-controller v1.8.5): the build does not need them.
#
# Usage: hack/build-flux.sh            build what is missing, print the dir
#        hack/build-flux.sh --cached   print the dir only if it is complete
#                                      (exit 1 otherwise, build nothing)
set -euo pipefail
SOURCE_CONTROLLER_VERSION=${SOURCE_CONTROLLER_VERSION:-v1.8.5}
KUSTOMIZE_CONTROLLER_VERSION=${KUSTOMIZE_CONTROLLER_VERSION:-v1.9.0}
# source-controller v1.8.5 requires github.com/fluxcd/pkg/artifact v0.8.1,
# which the proxy does not serve (403); v0.18.0 is served and builds.
SOURCE_CONTROLLER_UPGRADES=${SOURCE_CONTROLLER_UPGRADES:-github.com/fluxcd/pkg/artifact v0.18.0}
KUSTOMIZE_CONTROLLER_UPGRADES=${KUSTOMIZE_CONTROLLER_UPGRADES:-}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cairn
DIR=$CACHE/flux-sc-$SOURCE_CONTROLLER_VERSION-kc-$KUSTOMIZE_CONTROLLER_VERSION

complete() {
  [ -x "$DIR/bin/source-controller" ] && [ -x "$DIR/bin/kustomize-controller" ] &&
    [ -s "$DIR/crds/source.toolkit.fluxcd.io_gitrepositories.yaml" ] &&
    [ -s "$DIR/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml" ]
}
cached_only=0
case "${1:-}" in
  --cached) cached_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--cached]" >&2; exit 2 ;;
esac
if complete; then echo "$DIR"; exit 0; fi
[ $cached_only = 1 ] && exit 1

mkdir -p "$CACHE"
exec 9>"$CACHE/build-flux.lock"
flock 9
if complete; then echo "$DIR"; exit 0; fi

work=$(mktemp -d "$CACHE/build-flux.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/out
mkdir -p "$stage/bin" "$stage/crds"
export GOFLAGS=-mod=mod

# nonlocal_replaces prints the replace directives of a go.mod, single-line and
# in blocks, as single lines, leaving out those whose target is a directory.
nonlocal_replaces() {
  awk '
    { sub(/\/\/.*/, "") }
    /^replace[ \t]*\($/ { block = 1; next }
    block && /^\)/ { block = 0; next }
    block && /=>/ { line = $0 }
    !block && /^replace[ \t].*=>/ { line = $0; sub(/^replace[ \t]+/, "", line) }
    line != "" {
      split(line, side, "=>")
      target = side[2]; gsub(/^[ \t]+|[ \t]+$/, "", target)
      if (target !~ /^\.\.?\//) { gsub(/^[ \t]+|[ \t]+$/, "", line); print "replace " line }
      line = ""
    }
  ' "$1"
}

# build NAME MODULE VERSION "UPGRADES": builds MODULE@VERSION's main package
# (the module root) to $stage/bin/NAME and copies its CRDs to $stage/crds.
build() {
  local name=$1 module=$2 version=$3 upgrades=$4
  local dir=$work/$name
  mkdir -p "$dir"
  cd "$dir"
  echo "fetching $module $version" >&2
  go mod download -json "$module@$version" > mod.json
  local src
  src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' mod.json)
  [ -d "$src" ] || { echo "failed to download $module@$version:" >&2; cat mod.json >&2; exit 1; }
  local gover
  gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")
  {
    echo "module cairn.dev/fluxbuild/$name"
    echo
    echo "go $gover"
    echo
    echo "require $module $version"
    nonlocal_replaces "$src/go.mod"
    if [ -n "$upgrades" ]; then
      set -- $upgrades
      while [ $# -ge 2 ]; do echo "replace $1 => $1 $2"; shift 2; done
    fi
  } > go.mod
  echo "go.mod of the $name build:" >&2
  sed 's/^/  /' go.mod >&2
  cat > tools.go <<GO
//go:build tools

package tools

import _ "$module"
GO
  echo "resolving $name's dependencies" >&2
  go mod tidy -e >&2
  echo "building $name $version (minutes on a cold cache)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$stage/bin/$name" "$module"
  cp "$src"/config/crd/bases/*.yaml "$stage/crds/"
  cd "$work"
}

build source-controller github.com/fluxcd/source-controller "$SOURCE_CONTROLLER_VERSION" "$SOURCE_CONTROLLER_UPGRADES"
build kustomize-controller github.com/fluxcd/kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION" "$KUSTOMIZE_CONTROLLER_UPGRADES"
chmod -R u+w,go+rX "$stage"
rm -rf "$DIR"
mv "$stage" "$DIR"
echo "$DIR"

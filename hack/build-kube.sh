#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (from
# k8s.io/kubernetes) and kwok into a cache keyed by version, outside the checkout.
# Reused when present. Prints the bin directory on stdout.
set -euo pipefail
KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.37.2}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cairn
BIN=$CACHE/kube-$KUBE_VERSION-kwok-$KWOK_VERSION/bin
want=(kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwok-stages.yaml)
have=1
for b in "${want[@]}"; do [ -e "$BIN/$b" ] || have=0; done
if [ $have = 1 ]; then echo "$BIN"; exit 0; fi

# Concurrent runs (make test beside a test binary, or two checkouts) wait for
# one build; the lock is the one test/harness takes too.
mkdir -p "$BIN"
exec 9>"$CACHE/build-kube.lock"
flock 9
have=1
for b in "${want[@]}"; do [ -e "$BIN/$b" ] || have=0; done
if [ $have = 1 ]; then echo "$BIN"; exit 0; fi
work=$(mktemp -d "$CACHE/build-kube.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod
cat > go.mod <<GOMOD
module cairn.dev/kubebuild

go 1.26
GOMOD
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
echo "fetching k8s.io/kubernetes $KUBE_VERSION" >&2
go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" > kube.json
kdir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' kube.json)
{
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$kdir/go.mod" \
    | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
} >> go.mod
go mod tidy -e >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  echo "building $c" >&2
  go build -tags tools -ldflags "$ldflags" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c" && mv "$BIN/$c.tmp" "$BIN/$c"
done
echo "building kwok $KWOK_VERSION" >&2
GOBIN=$work/gobin go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
mv "$work/gobin/kwok" "$BIN/kwok"
kwokdir=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION
stages=""
for d in node/fast node/heartbeat pod/fast; do
  for f in "$kwokdir"/kustomize/stage/$d/*.yaml; do
    case "$f" in */kustomization.yaml) continue;; esac
    stages+="$(cat "$f")"$'\n---\n'
  done
done
printf '%s' "$stages" > "$BIN/kwok-stages.yaml"
echo "$BIN"

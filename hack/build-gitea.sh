#!/usr/bin/env bash
# Builds Gitea (code.gitea.io/gitea) with SQLite into a cache keyed by version,
# outside the checkout, for the forge tests (test/forge). Reused when present.
# Gitea is built without the bindata tag, so its options/ and templates/
# directories are copied beside the binary; the harness points Gitea's static
# root there. Prints the directory on stdout; progress goes to stderr.
# Concurrent runs wait for one build (flock on $CACHE/build-gitea.lock).
set -euo pipefail
GITEA_VERSION=${GITEA_VERSION:-v1.26.1}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/cairn
DIR=$CACHE/gitea-$GITEA_VERSION

complete() { [ -x "$DIR/gitea" ] && [ -d "$DIR/options" ] && [ -d "$DIR/templates" ]; }
if complete; then echo "$DIR"; exit 0; fi

mkdir -p "$CACHE"
exec 9>"$CACHE/build-gitea.lock"
flock 9
if complete; then echo "$DIR"; exit 0; fi

work=$(mktemp -d "$CACHE/build-gitea.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOFLAGS=-mod=mod
echo "fetching code.gitea.io/gitea $GITEA_VERSION" >&2
go mod download -json "code.gitea.io/gitea@$GITEA_VERSION" > gitea.json
src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' gitea.json)
[ -d "$src" ] || { echo "failed to download code.gitea.io/gitea@$GITEA_VERSION" >&2; exit 1; }
# Same language version as Gitea's own go.mod, and its replace lines: without
# them the build picks dependency versions Gitea does not compile against.
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")
{
  echo "module cairn.dev/giteabuild"
  echo
  echo "go $gover"
  echo
  echo "require code.gitea.io/gitea $GITEA_VERSION"
  grep -E '^replace ' "$src/go.mod" | sed 's#//.*##'
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "code.gitea.io/gitea"
GO
echo "resolving Gitea's dependencies" >&2
go mod tidy -e >&2
echo "building gitea $GITEA_VERSION (several minutes on a cold cache)" >&2
tags="sqlite sqlite_unlock_notify"
ldflags="-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=$tags'"
stage=$work/out
mkdir -p "$stage"
CGO_ENABLED=1 go build -tags "$tags" -ldflags "$ldflags" -o "$stage/gitea" code.gitea.io/gitea
cp -R "$src/options" "$src/templates" "$stage/"
chmod -R u+w,go+rX "$stage"
rm -rf "$DIR"
mv "$stage" "$DIR"
echo "$DIR"

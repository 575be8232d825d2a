#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx in a _test.go file) of the
# repository for SECONDS each, one at a time, and fails if any of them fails.
# Usage: hack/fuzz.sh [SECONDS]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
failed=()
count=0

# fuzz_one runs one target. Go 1.26's fuzz coordinator can end a time-bounded run
# with a bare "context deadline exceeded" and no crasher (golang/go#75804): a
# failure that wrote no new input under testdata/fuzz is run once more.
fuzz_one() {
  local pkg=$1 name=$2 before after
  before=$(find "$pkg/testdata/fuzz/$name" -type f 2>/dev/null | wc -l)
  go test -run='^$' -fuzz="^${name}\$" -fuzztime="${secs}s" "$pkg" && return 0
  after=$(find "$pkg/testdata/fuzz/$name" -type f 2>/dev/null | wc -l)
  [ "$after" -gt "$before" ] && return 1
  echo "fuzz: $name failed without a crasher (golang/go#75804); running it again" >&2
  go test -run='^$' -fuzz="^${name}\$" -fuzztime="${secs}s" "$pkg"
}
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  while IFS= read -r name; do
    count=$((count + 1))
    echo "fuzz: $pkg $name for ${secs}s" >&2
    if ! fuzz_one "$pkg" "$name"; then
      failed+=("$pkg $name")
    fi
  done < <(grep -oE '^func Fuzz[A-Za-z0-9_]*\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(/\1/')
done < <(git ls-files --cached --others --exclude-standard -- '*_test.go' | xargs -r grep -lE '^func Fuzz[A-Za-z0-9_]*\(' | sort)
if [ "$count" = 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 0
fi
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'fuzz: FAILED %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz: $count targets passed" >&2

#!/usr/bin/env bash
# Checks, in seconds and before any long build, everything that `make demo`,
# `make test`, `make cluster-up`, `make bench` and .ci/run need on the machine,
# and installs what is missing from Debian's packages:
#
#   etcd             (etcd-server)      the API server's store
#   docker-registry  (docker-registry)  the OCI registry of the tests and the demo
#   git, make, gcc   (git, make, gcc)   gcc builds Gitea's SQLite driver (cgo)
#   flock, useradd   (util-linux, passwd)
#   unshare, setpriv, mount, chroot  (util-linux, mount, coreutils): the e2e test
#                    that runs cairn's image as its Deployment does, without a runtime
#   chromium         (chromium)         the headless browser the dashboard's e2e tests drive
#
# Go itself (1.26, /usr/local/go/bin or on PATH) cannot come from Debian: when it
# is missing the script stops with that message. Installing needs root (or
# password-less sudo); otherwise the script prints the apt-get command and exits 1.
#
# Usage: hack/prereqs.sh          check and install what is missing
#        hack/prereqs.sh --check  check only (exit 1 naming what is missing)
set -euo pipefail
export PATH=$PATH:/usr/local/go/bin

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

fail() { echo "prereqs: $*" >&2; exit 1; }

command -v go >/dev/null || fail "Go is not installed (want Go 1.26 at /usr/local/go/bin or on PATH)"
gover=$(go env GOVERSION)
case "$gover" in
  go1.2[6-9]*|go1.[3-9]*) ;;
  *) fail "Go $gover is too old (want 1.26 or newer)" ;;
esac

# command package
needs=(
  "etcd etcd-server"
  "docker-registry docker-registry"
  "git git"
  "make make"
  "gcc gcc"
  "flock util-linux"
  "unshare util-linux"
  "setpriv util-linux"
  "mount mount"
  "chroot coreutils"
  "useradd passwd"
  "chromium chromium"
)
missing=()
for n in "${needs[@]}"; do
  read -r cmd pkg <<<"$n"
  command -v "$cmd" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$cmd" >/dev/null || missing+=("$pkg")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

cmd=(apt-get install -y -q --no-install-recommends "${missing[@]}")
[ "$check_only" = 1 ] && fail "missing Debian packages: ${missing[*]} (run: ${cmd[*]})"
sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
    fail "missing Debian packages: ${missing[*]}; install them as root: ${cmd[*]}"
  sudo=(sudo -n)
fi
echo "prereqs: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2 || fail "apt-get update failed (is Debian's package mirror reachable?)"
"${sudo[@]}" "${cmd[@]}" >&2 || fail "failed to install ${missing[*]}"
# The packages start system services on their default ports (etcd 2379, registry
# 5000); the harness only uses free ports, so they do not clash, but they are not
# needed: stop them where systemd runs.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  "${sudo[@]}" systemctl disable --now etcd docker-registry >/dev/null 2>&1 || true
fi
for n in "${needs[@]}"; do
  read -r c pkg <<<"$n"
  PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null || fail "$c is still missing after installing $pkg"
done
echo "prereqs: installed ${missing[*]}" >&2

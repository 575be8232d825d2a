#!/usr/bin/env bash
# make demo: a local cluster with a registry (test/localcluster, state in
# $DEMO_DIR), cairn installed into it, the example modules pushed to the
# registry and the examples synced once. Safe to run again: the cluster is
# reused and every step is idempotent.
#
# The cairn CLI flags used below belong to cmd/cairn; the lines marked
# "CLI:" are the ones to adjust when they change.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_DIR=${DEMO_DIR:-.demo}
CAIRN=${CAIRN:-bin/cairn}
# DEMO_REGISTRY_PORT=5001 serves the registry on the port examples/registries.yaml
# names (then no override is needed); by default a free port is used.
DEMO_REGISTRY_PORT=${DEMO_REGISTRY_PORT:-5001}
DEMO_MODULE_VERSION=${DEMO_MODULE_VERSION:-v0.1.0}
# The registry host the example declarations name, replaced by the demo's.

step() { printf '\n==> %s\n' "$*" >&2; }

[ -x "$CAIRN" ] || { echo "demo: $CAIRN is missing: run make build" >&2; exit 1; }

step "local cluster and registry in $DEMO_DIR"
go run ./test/localcluster up --dir "$DEMO_DIR" --full --registry ${DEMO_REGISTRY_PORT:+--registry-port "$DEMO_REGISTRY_PORT"}
set -a
# shellcheck disable=SC1091
. "$DEMO_DIR/env"
set +a
kubeconfig=$KUBECONFIG  # absolute, from the env file

step "cairn install"
# Install cairn's CRDs into the cluster.
"$CAIRN" install --kubeconfig "$kubeconfig"

shopt -s nullglob
modules=(examples/registry/*/)
for module in "${modules[@]}"; do
  module=${module%/}
  step "cairn push module $module"
  # CLI: push one CUE module directory to the demo registry (plain HTTP).
  "$CAIRN" push module "$module" --registry "$CAIRN_REGISTRY" --version "$DEMO_MODULE_VERSION" --plain-http
done

step "cairn sync --once"
# One reconcile of the declarations under examples/ (read from disk). The
# Registry they declare is 127.0.0.1:$DEMO_REGISTRY_PORT, the demo registry.
"$CAIRN" sync --repo examples --once --kubeconfig "$kubeconfig" || true

step "cairn status"
# CLI: the state of every instance.
"$CAIRN" status --kubeconfig "$kubeconfig"

cat <<EOT

The demo cluster is running (state in $DEMO_DIR, logs in $DEMO_DIR/logs).
Use it:
  export KUBECONFIG=$kubeconfig
  $CAIRN_KUBE_BIN/kubectl get moduleinstances,deployments -A
  $CAIRN status --kubeconfig \$KUBECONFIG
Registry: $CAIRN_REGISTRY (plain HTTP)
Run the tests against it: set -a; . $DEMO_DIR/env; set +a; go test ./...
Stop it: make demo-down
EOT

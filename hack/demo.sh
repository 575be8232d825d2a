#!/usr/bin/env bash
# make demo: a local cluster with a registry (test/localcluster, state in
# $DEMO_DIR), cairn installed into it, the example modules pushed to the
# registry and the examples followed by cairn's controller (two replicas as
# local processes, hack/demo-controller.sh). Safe to run again: the cluster is
# reused and every step is idempotent.
#
# The cairn CLI flags used below belong to cmd/cairn; the lines marked
# "CLI:" are the ones to adjust when they change.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_DIR=${DEMO_DIR:-.demo}
CAIRN=${CAIRN:-bin/cairn}
# DEMO_REGISTRY_PORT: the registry's port (default 5001, the one examples/ names;
# another port is rewritten into the demo's copy of examples/, so a second demo can
# run beside the first). DEMO_PORT_BASE: the replicas' ports (hack/demo-controller.sh).
DEMO_REGISTRY_PORT=${DEMO_REGISTRY_PORT:-5001}
DEMO_MODULE_VERSION=${DEMO_MODULE_VERSION:-v0.1.0}
# The registry host the example declarations name, replaced by the demo's.
EXAMPLES_REGISTRY=127.0.0.1:5001

step() { printf '\n==> %s\n' "$*" >&2; }

[ -x "$CAIRN" ] || { echo "demo: $CAIRN is missing: run make build" >&2; exit 1; }

step "local cluster and registry in $DEMO_DIR"
go run ./test/localcluster up --dir "$DEMO_DIR" --full --registry ${DEMO_REGISTRY_PORT:+--registry-port "$DEMO_REGISTRY_PORT"}
set -a
# shellcheck disable=SC1091
. "$DEMO_DIR/env"
set +a
kubeconfig=$KUBECONFIG  # absolute, from the env file

step "examples/ for this demo in $DEMO_DIR/examples (registry $CAIRN_REGISTRY)"
# The controller and Gitea get this copy: the registry host examples/ names
# ($EXAMPLES_REGISTRY) becomes the demo's.
rm -rf "$DEMO_DIR/examples"
cp -R examples "$DEMO_DIR/examples"
if [ "$CAIRN_REGISTRY" != "$EXAMPLES_REGISTRY" ]; then
  grep -rlF "$EXAMPLES_REGISTRY" "$DEMO_DIR/examples" | while read -r f; do
    sed -i "s|${EXAMPLES_REGISTRY//./\\.}|$CAIRN_REGISTRY|g" "$f"
  done
fi

step "cairn install"
# Install cairn's CRDs and its namespace (cairn-system) into the cluster.
"$CAIRN" install --kubeconfig "$kubeconfig"

step "cairn keygen (demo key pair in $DEMO_DIR)"
# A cosign-compatible key pair; the private key is encrypted with a password
# kept beside it (a demo: use a secret store for real keys).
if [ ! -s "$DEMO_DIR/cosign.key" ]; then
  (umask 077; head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DEMO_DIR/cosign.password")
  # CLI: write cosign.key and cosign.pub.
  CAIRN_PASSWORD=$(cat "$DEMO_DIR/cosign.password") "$CAIRN" keygen --output-key-prefix "$DEMO_DIR/cosign"
fi
export CAIRN_PASSWORD
CAIRN_PASSWORD=$(cat "$DEMO_DIR/cosign.password")

step "make image: cairn's OCI image in the demo registry, signed with the demo key"
# The static binary in a one-layer image (hack/image), pushed and signed; its
# digest reference, for a Deployment to pin, is in $DEMO_DIR/image.ref.
make --no-print-directory image IMAGE="$CAIRN_REGISTRY/cairn/cairn:demo" SIGN_KEY="$DEMO_DIR/cosign.key" \
  IMAGE_REF_FILE="$DEMO_DIR/image.ref" >/dev/null

step "trusted public key in cairn-system (the Secret examples/registries.yaml names)"
kubectl=$CAIRN_KUBE_BIN/kubectl
"$kubectl" --kubeconfig "$kubeconfig" -n cairn-system create secret generic cosign-pub \
  --from-file=cosign.pub="$DEMO_DIR/cosign.pub" --dry-run=client -o yaml |
  "$kubectl" --kubeconfig "$kubeconfig" apply -f - >/dev/null

shopt -s nullglob
modules=(examples/registry/*/)
for module in "${modules[@]}"; do
  module=${module%/}
  step "cairn push module $module (signed)"
  # CLI: push one CUE module directory to the demo registry (plain HTTP).
  "$CAIRN" push module "$module" --registry "$CAIRN_REGISTRY" --version "$DEMO_MODULE_VERSION" --plain-http
  # The module's repository is its path without the major version.
  path=$(sed -n 's/^module: *"\([^"@]*\).*/\1/p' "$module/cue.mod/module.cue")
  # CLI: sign the module's manifest (the tag is resolved to a digest once).
  "$CAIRN" sign "$CAIRN_REGISTRY/$path:$DEMO_MODULE_VERSION" --key "$DEMO_DIR/cosign.key" --plain-http
done

charts=(examples/charts/*/)
for chart in "${charts[@]}"; do
  chart=${chart%/}
  step "cairn push chart $chart (signed)"
  # CLI: package the chart with the Helm SDK, push it in Helm's OCI format and sign it.
  "$CAIRN" push chart "$chart" --to "oci://$CAIRN_REGISTRY/charts/$(basename "$chart")" --plain-http \
    --sign-key "$DEMO_DIR/cosign.key"
done
step "cairn verify (what the sync checks, by digest)"
"$CAIRN" verify "$CAIRN_REGISTRY/charts/hello:0.1.0" --key "$DEMO_DIR/cosign.pub" --plain-http

# The controller: two replicas with the ServiceAccount's identity follow a Git
# copy of examples/ (hack/demo-controller.sh). The Registry the examples
# declare is 127.0.0.1:$DEMO_REGISTRY_PORT, the demo registry.
CAIRN=$CAIRN DEMO_DIR=$DEMO_DIR kubeconfig=$kubeconfig kubectl=$kubectl hack/demo-controller.sh
port_base=$(cat "$DEMO_DIR/port-base")

step "cairn status"
# CLI: the state of every instance.
"$CAIRN" status --kubeconfig "$kubeconfig"

cat <<EOT

The demo cluster is running (state in $DEMO_DIR, logs in $DEMO_DIR/logs).
Use it:
  export KUBECONFIG=$kubeconfig
  $CAIRN_KUBE_BIN/kubectl get moduleinstances,deployments -A
  $CAIRN status --kubeconfig \$KUBECONFIG
The controller runs as two replicas (pods cairn-controller-0 and -1, as local processes with
the ServiceAccount's token in $DEMO_DIR/controller.kubeconfig), following $DEMO_DIR/platform:
  $CAIRN_KUBE_BIN/kubectl -n cairn-system get lease cairn-sync -w      # who leads
  tail -f $DEMO_DIR/logs/cairn-controller-*.log                        # sync results, JSON logs
  curl -s 127.0.0.1:$((port_base + 80))/metrics | grep ^cairn_                        # replica 0 (replica 1: $((port_base + 180)))
  (cd $DEMO_DIR/platform && sed -i 's/pods: 20/pods: 25/' instances/team-a.yaml && git commit -qam 'team-a: 25 pods')
The dashboard (every replica serves it; live, as the user who logs in):
  http://127.0.0.1:$((port_base + 90))/    log in with a token of the demo's user:
  $CAIRN_KUBE_BIN/kubectl --kubeconfig $kubeconfig -n cairn-system create token dashboard-demo
  or, as your kubeconfig's user: $CAIRN dashboard --kubeconfig $kubeconfig
Fail it over: kill -9 the leader (the other takes the Lease within 15 s and goes on):
  kill -9 \$(cat $DEMO_DIR/pods/\$($CAIRN_KUBE_BIN/kubectl -n cairn-system get lease cairn-sync -o jsonpath='{.spec.holderIdentity}' | cut -d_ -f1).pid)
Stop it: kill \$(cat $DEMO_DIR/pods/*.pid) (make demo-down stops it all)
Registry: $CAIRN_REGISTRY (plain HTTP); modules and the chart are signed with
$DEMO_DIR/cosign.key (password in $DEMO_DIR/cosign.password), verified under Enforce:
  $CAIRN verify $CAIRN_REGISTRY/charts/hello:0.1.0 --key $DEMO_DIR/cosign.pub --plain-http
  $CAIRN_KUBE_BIN/kubectl get mi -A -o wide     # the VERIFIED column
cairn's own image, signed the same way: $(cat "$DEMO_DIR/image.ref")
  $CAIRN verify $(cat "$DEMO_DIR/image.ref") --key $DEMO_DIR/cosign.pub --plain-http
Run the tests against it: set -a; . $DEMO_DIR/env; set +a; go test ./...
Stop it: make demo-down
EOT

# DEMO_GITEA=1: also a local Gitea holding examples/ as a repository, whose
# push and pull_request webhook reaches a `cairn sync --forge gitea` running
# in the background (pid in $DEMO_DIR/cairn-sync.pid; make demo-down stops both).
[ "${DEMO_GITEA:-}" = 1 ] || exit 0
DEMO_WEBHOOK_PORT=${DEMO_WEBHOOK_PORT:-9292}
secret_file=$DEMO_DIR/webhook-secret
sync_pid_file=$DEMO_DIR/cairn-sync.pid
sync_log=$DEMO_DIR/logs/cairn-sync.log

step "gitea with the example repository in $DEMO_DIR/gitea"
if [ ! -s "$secret_file" ]; then
  (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file")
fi
go run ./test/localforge up --dir "$DEMO_DIR/gitea" --examples "$DEMO_DIR/examples" \
  --webhook-url "http://127.0.0.1:$DEMO_WEBHOOK_PORT/hooks/gitea" --webhook-secret-file "$secret_file"
set -a
# shellcheck disable=SC1091
. "$DEMO_DIR/gitea/env"
set +a

step "stop the controller replicas: cairn sync follows Gitea instead (both take the Lease cairn-sync)"
for pid_file in "$DEMO_DIR"/pods/*.pid; do
  [ -s "$pid_file" ] && kill "$(cat "$pid_file")" 2>/dev/null || true
  rm -f "$pid_file"
done

step "cairn sync --forge gitea --listen 127.0.0.1:$DEMO_WEBHOOK_PORT (background)"
if [ -s "$sync_pid_file" ] && kill -0 "$(cat "$sync_pid_file")" 2>/dev/null; then
  kill "$(cat "$sync_pid_file")"
  while kill -0 "$(cat "$sync_pid_file")" 2>/dev/null; do sleep 0.2; done
fi
mkdir -p "$DEMO_DIR/logs"
# CLI: follow the Gitea repository; every sync after the first comes from a webhook.
nohup "$CAIRN" sync --repo "$GITEA_REPO_URL" --interval 10m \
  --forge gitea --forge-url "$GITEA_URL" --forge-token-file "$GITEA_TOKEN_FILE" \
  --listen "127.0.0.1:$DEMO_WEBHOOK_PORT" --webhook-secret-file "$secret_file" \
  --kubeconfig "$kubeconfig" >"$sync_log" 2>&1 </dev/null &
echo $! >"$sync_pid_file"
for _ in $(seq 50); do
  curl -s -o /dev/null "http://127.0.0.1:$DEMO_WEBHOOK_PORT/" && break
  kill -0 "$(cat "$sync_pid_file")" 2>/dev/null || { echo "demo: cairn sync exited:" >&2; tail -20 "$sync_log" >&2; exit 1; }
  sleep 0.2
done

cat <<EOT

Gitea: $GITEA_URL (user $GITEA_USER, password $GITEA_PASSWORD)
Repository: $GITEA_URL/$GITEA_REPO (clone: $GITEA_REPO_URL)
cairn sync follows it in the background (pid $(cat "$sync_pid_file")), log: $sync_log
Push a change and watch the commit status:
  git clone http://$GITEA_USER:$GITEA_PASSWORD@${GITEA_URL#http://}/$GITEA_REPO.git /tmp/platform && cd /tmp/platform
  sed -i 's/pods: 20/pods: 25/' instances/team-a.yaml && git commit -qam 'team-a: 25 pods' && git push
  tail -f $sync_log     # the sync the webhook triggered
  $GITEA_URL/$GITEA_REPO/commits/branch/main shows its cairn/sync status
Stop it all: make demo-down
EOT

#!/usr/bin/env bash
# Part of make demo (hack/demo.sh): cairn's controller, installed with
# `cairn install --controller`, run as two local processes (kwok runs no
# containers) with exactly the Deployment's args and env and the identity of
# its ServiceAccount: a TokenRequest token in a kubeconfig of its own. What a
# kubelet would give a pod is given here: the volume paths move under
# $DEMO_DIR/pods/<pod>/, and each replica's ports move to 127.0.0.1 ports of
# its own. Logs in $DEMO_DIR/logs/, pids in $DEMO_DIR/pods/<pod>.pid.
#
# Needs: CAIRN, DEMO_DIR, kubeconfig and kubectl set by demo.sh.
set -euo pipefail

repo_dir=$DEMO_DIR/platform
pods_dir=$DEMO_DIR/pods
ctrl_kubeconfig=$DEMO_DIR/controller.kubeconfig
k() { "$kubectl" --kubeconfig "$kubeconfig" "$@"; }

step() { printf '\n==> %s\n' "$*" >&2; }

step "the platform repository: examples/ as a Git repository in $repo_dir"
# The controller follows a branch of a Git repository; a copy of examples/ is one.
mkdir -p "$repo_dir"
[ -d "$repo_dir/.git" ] || git -C "$repo_dir" init -q -b main
find "$repo_dir" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
cp -R "$DEMO_DIR/examples/." "$repo_dir/"   # examples/ with the demo's registry (demo.sh)
git -C "$repo_dir" add -A
git -C "$repo_dir" -c user.name=demo -c user.email=demo@cairn.invalid commit -qm "examples" 2>/dev/null || true
repo_url="file://$(cd "$repo_dir" && pwd)"

step "stop the replicas of an earlier run"
for pid_file in "$pods_dir"/*.pid; do
  [ -s "$pid_file" ] || continue
  kill "$(cat "$pid_file")" 2>/dev/null || true
  while kill -0 "$(cat "$pid_file")" 2>/dev/null; do sleep 0.2; done
  rm -f "$pid_file"
done

step "cairn install --controller (--allow-apply-as-controller: the examples' team-a and team-b name no ServiceAccount)"
# CLI: the controller's manifests, the image pinned by the digest make image wrote.
"$CAIRN" install --controller --repo "$repo_url" --interval 30s --image "$(cat "$DEMO_DIR/image.ref")" \
  --allow-apply-as-controller --kubeconfig "$kubeconfig" >/dev/null

step "a token of the ServiceAccount cairn-controller, in $ctrl_kubeconfig"
server=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca_data=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
ca_file=$(k config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
if [ -n "$ca_data" ]; then
  ca_file=$DEMO_DIR/ca.crt
  printf '%s' "$ca_data" | base64 -d >"$ca_file"
fi
token=$(k -n cairn-system create token cairn-controller --duration 24h)
rm -f "$ctrl_kubeconfig"
kc() { "$kubectl" --kubeconfig "$ctrl_kubeconfig" config "$@" >/dev/null; }
kc set-cluster demo --server "$server" --certificate-authority "$ca_file" --embed-certs
(umask 077; kc set-credentials cairn-controller --token "$token")
kc set-context cairn-controller --cluster demo --user cairn-controller
kc use-context cairn-controller

# The Deployment's container: its args and the ports and mounts to map.
mapfile -t args < <(k -n cairn-system get deployment cairn-controller \
  -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
mapfile -t mounts < <(k -n cairn-system get deployment cairn-controller \
  -o jsonpath='{range .spec.template.spec.containers[0].volumeMounts[*]}{.mountPath}{"\n"}{end}')

# start_pod NAME PORT_BASE: one replica; port :N of the container is 127.0.0.1:PORT_BASE+N-8000.
start_pod() {
  local name=$1 base=$2 root=$pods_dir/$1 a m out=()
  for m in "${mounts[@]}"; do mkdir -p "$root$m"; done
  for a in "${args[@]}"; do
    if [[ $a =~ ^:([0-9]+)$ ]]; then
      a=127.0.0.1:$((base + BASH_REMATCH[1] - 8000))
    fi
    for m in "${mounts[@]}"; do
      [[ $a == "$m" || $a == "$m"/* ]] && a=$root$a
    done
    out+=("$a")
  done
  POD_NAME=$name POD_NAMESPACE=cairn-system KUBECONFIG=$ctrl_kubeconfig \
    nohup "$CAIRN" "${out[@]}" >"$DEMO_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$pods_dir/$name.pid"
}

# The replicas' ports: container port N of replica i is 127.0.0.1:BASE+100*i+N-8000.
# BASE is DEMO_PORT_BASE, else the one an earlier run of this demo chose (kept in
# $DEMO_DIR/port-base), else the first of 18000, 18200, ... whose ports are free, so
# that a second demo (another DEMO_DIR) runs beside the first.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base_free() {
  local p
  for p in 80 81 90 1292 180 181 190 1392; do port_free $(($1 + p)) || return 1; done
}
base=${DEMO_PORT_BASE:-}
if [ -z "$base" ] && [ -s "$DEMO_DIR/port-base" ]; then
  base=$(cat "$DEMO_DIR/port-base")
  base_free "$base" || base=""
fi
if [ -z "$base" ]; then
  for base in $(seq 18000 200 29800) ""; do
    [ -n "$base" ] && base_free "$base" && break
  done
  [ -n "$base" ] || { echo "demo: no free ports from 18000 to 30000: set DEMO_PORT_BASE" >&2; exit 1; }
fi
echo "$base" >"$DEMO_DIR/port-base"

step "a user of the dashboard: ServiceAccount cairn-system/dashboard-demo, bound to cairn-dashboard-operate and view"
k -n cairn-system create serviceaccount dashboard-demo --dry-run=client -o yaml | k apply -f - >/dev/null
for role in cairn-dashboard-operate view; do
  k create clusterrolebinding "dashboard-demo-$role" --clusterrole="$role" --serviceaccount=cairn-system:dashboard-demo \
    --dry-run=client -o yaml | k apply -f - >/dev/null
done

step "two replicas: cairn-controller-0 (metrics 127.0.0.1:$((base + 80)), dashboard 127.0.0.1:$((base + 90))) and cairn-controller-1 (127.0.0.1:$((base + 180)), $((base + 190)))"
mkdir -p "$DEMO_DIR/logs" "$pods_dir"
start_pod cairn-controller-0 "$base"
start_pod cairn-controller-1 $((base + 100))

step "waiting for a leader and its first sync"
for _ in $(seq 150); do
  holder=$(k -n cairn-system get lease cairn-sync -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
  [ -n "$holder" ] && grep -q "synced revision" "$DEMO_DIR"/logs/cairn-controller-*.log && break
  for p in "$pods_dir"/*.pid; do
    kill -0 "$(cat "$p")" 2>/dev/null || { echo "demo: $(basename "$p" .pid) exited:" >&2; tail -20 "$DEMO_DIR/logs/$(basename "$p" .pid).log" >&2; exit 1; }
  done
  sleep 0.2
done
echo "leader: ${holder:-none yet}" >&2

# The instances become Ready as their workloads do (a dependent waits for its
# dependency): give them a minute before printing, then print whatever they are.
step "waiting for every instance to be Ready (up to 60 s)"
k wait --for=condition=Ready moduleinstances --all -A --timeout=60s >/dev/null 2>&1 ||
  echo "demo: not every instance is Ready yet; cairn status below says why" >&2

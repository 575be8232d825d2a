// Package harness owns the local Kubernetes cluster used by cairn's end-to-end
// tests, benchmarks and demo: etcd, kube-apiserver and, on request,
// kube-controller-manager, kube-scheduler and kwok, plus a Distribution
// registry, all started as plain processes on 127.0.0.1 with free ports.
//
// Tests use it through Main, ForTest and Shared; the detached mode used by
// `make demo` lives in test/localcluster and uses Start, Attach and StopDir.
// The binaries come from hack/build-kube.sh (or $CAIRN_KUBE_BIN), etcd and
// docker-registry from Debian's etcd-server and docker-registry packages.
package harness

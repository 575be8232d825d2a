// Package harness owns the local Kubernetes cluster used by cairn's end-to-end
// tests, benchmarks and demo: etcd, kube-apiserver and, on request,
// kube-controller-manager, kube-scheduler and kwok, plus a Distribution
// registry, all started as plain processes on 127.0.0.1 with free ports.
//
// A test package that needs the cluster calls Main from TestMain and ForTest
// (or Shared, in benchmarks) where it needs it:
//
//	func TestMain(m *testing.M) { harness.Main(m, harness.DefaultOptions()) }
//
//	func TestSomething(t *testing.T) {
//		c := harness.ForTest(t) // started on first use, once per test binary
//		ns := c.Namespace(t)    // a namespace of its own, deleted at the end
//		client, _ := kubernetes.NewForConfig(c.RESTConfig)
//		...
//	}
//
// With CAIRN_TEST_KUBECONFIG (and CAIRN_TEST_REGISTRY) set, for instance by
// `set -a; . .demo/env; set +a`, tests use that cluster instead of starting
// one. The detached mode used by `make demo` lives in test/localcluster and
// uses Start, Attach and StopDir. The Kubernetes binaries come from
// hack/build-kube.sh (or $CAIRN_KUBE_BIN), etcd and docker-registry from
// Debian's etcd-server and docker-registry packages.
//
// kube-apiserver runs with --feature-gates=WatchList=false. Debian's etcd 3.4.23
// is older than what kube-apiserver needs to serve watch-list streams (etcd
// 3.4.31 or 3.5.13, for RequestWatchProgress), and with the gate on the server
// turns every watch from resourceVersion "0" into such a stream and refuses it:
// kwok, which watches from "0", then saw pods and nodes only at its relists,
// after a back-off of up to a minute ("watch ended with error ... RequestWatchProgress
// is disabled" in logs/kwok.log), and a one-pod Job took 6 to 75 s to complete
// instead of about 1 s. KUBE_FEATURE_WatchListClient=false for kwok does not help
// (the stream is the server's doing); see apiServerFeatureGates.
// TestJobCompletesPromptly logs the figure and fails if kwok's log shows the error.
package harness

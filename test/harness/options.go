package harness

import (
	"io"
	"time"
)

// Options says what Start runs and where.
type Options struct {
	// Dir holds the state of the cluster: etcd data, certificates, the admin
	// kubeconfig, logs/, pids/ and registry/. Required by Start.
	Dir string
	// Full adds kube-controller-manager, kube-scheduler and kwok with one
	// Ready node, so that Deployments become Available, namespaces finish
	// deleting and garbage collection happens.
	Full bool
	// Registry adds a plain-HTTP Distribution registry (Debian docker-registry).
	Registry bool
	// RegistryPort fixes the registry's port (for declarations that name it);
	// 0, the default, picks a free one.
	RegistryPort int
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler,
	// kubectl, kwok and kwok-stages.yaml. Empty means FindBinaries.
	BinDir string
	// Detached leaves the processes running when the calling process exits
	// (the demo); otherwise they are killed with it.
	Detached bool
	// APIServerArgs are extra kube-apiserver flags ("--feature-gates=...").
	APIServerArgs []string
	// StartTimeout bounds the whole start. Zero means two minutes.
	StartTimeout time.Duration
	// Log receives one line per step. Nil discards.
	Log io.Writer
}

// DefaultOptions returns the options of the shared test cluster: Full and
// Registry, in a directory chosen by the caller.
func DefaultOptions() Options {
	return Options{Full: true, Registry: true, StartTimeout: 2 * time.Minute}
}

func (o Options) startTimeout() time.Duration {
	if o.StartTimeout <= 0 {
		return 2 * time.Minute
	}
	return o.StartTimeout
}

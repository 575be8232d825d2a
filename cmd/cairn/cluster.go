package main

import (
	"cairn.dev/cairn/reconciler"
)

// engine connects to the cluster and returns an engine for the repository flags.
func engine(kube *kubeFlags, repo *repoFlags, progress bool, errOut interface{ Write([]byte) (int, error) },
	reporter reconciler.Reporter) (*reconciler.Engine, func(), error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, nil, err
	}
	cluster, err := reconciler.NewCluster(cfg)
	if err != nil {
		return nil, nil, err
	}
	opts, err := repo.engineOptions()
	if err != nil {
		return nil, nil, err
	}
	if progress {
		opts.Progress = errOut
	}
	opts.Reporter = reporter
	if u, err := repo.url(); err == nil && !repo.isDir() {
		opts.Repository = redactURL(u)
	}
	renderer := newRenderer()
	return reconciler.New(cluster, renderer, opts), func() { _ = renderer.Close() }, nil
}

package main

import (
	"io"

	"github.com/go-logr/logr"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/render"
)

// engine connects to the cluster and returns an engine for the repository flags that
// writes its progress to progress (nil: none) and logs to log; tune adjusts the
// options last.
func engine(kube *kubeFlags, repo *repoFlags, progress io.Writer, reporter report.Reporter,
	log logr.Logger, tune ...func(*reconciler.Options)) (*reconciler.Engine, func(), error) {
	return engineWith(render.DefaultRendererOptions(), kube, repo, progress, reporter, log, tune...)
}

// engineWith is engine with a renderer of options ro.
func engineWith(ro render.RendererOptions, kube *kubeFlags, repo *repoFlags, progress io.Writer, reporter report.Reporter,
	log logr.Logger, tune ...func(*reconciler.Options)) (*reconciler.Engine, func(), error) {
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
	opts.Progress, opts.Reporter, opts.Log = progress, reporter, log
	if u, err := repo.url(); err == nil && !repo.isDir() {
		opts.Repository = redactURL(u)
	}
	for _, t := range tune {
		t(&opts)
	}
	renderer := render.NewRendererWithOptions(ro)
	return reconciler.New(cluster, renderer, opts), func() { _ = renderer.Close() }, nil
}

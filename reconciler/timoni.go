package reconciler

import (
	"context"
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/rendercache"
	"cairn.dev/cairn/render"
)

// timoniRequest sets the Timoni module of a render request: a directory of the
// repository, or an OCI module whose files renderTimoniArtifact pulls once verified.
func timoniRequest(req *render.Request, m *cairnv1.TimoniModule) {
	req.Catalogs, req.SkewPolicy = nil, "" // a Timoni module knows no catalogs
	if m.Path != "" {
		req.Timoni = &render.TimoniModule{Path: cleanLocal(m.Path)}
		return
	}
	req.Timoni = &render.TimoniModule{Version: m.Version}
}

// setKubeVersion gives a Timoni module's render the cluster's Kubernetes version (its
// kubeVersion tag); a cluster that could not be discovered fails the render
// (transient: retried), as for charts.
func (s *RevisionState) setKubeVersion(ctx context.Context, key string, req *render.Request) *outcome.Failure {
	if req.Timoni == nil {
		return nil
	}
	c := s.capabilities(ctx)
	if c.err != nil {
		return outcome.NewTransient(cairnv1.ReasonRenderFailed, fmt.Errorf("failed to render %s: %w", key, c.err))
	}
	req.Timoni.KubeVersion = c.caps.KubeVersion
	return nil
}

// renderTimoniArtifact pulls the verified Timoni module by digest and renders it,
// through the render cache when one is given: its key is the whole request (values,
// module version, Kubernetes version) and the module's digest, so the module is not
// pulled again for a render the cache has.
func renderTimoniArtifact(ctx context.Context, renderer Renderer, cache *rendercache.Cache, in *chartInput,
	req render.Request) (*render.Result, bool, error) {
	t := *req.Timoni
	t.Ref, t.Digest = in.Display(), in.Digest
	req.Timoni = &t
	return rendercache.Through(cache, cacheKey(req, "timoni:"+in.Display()), func() (*render.Result, error) {
		files, err := in.PullTimoniModule(ctx)
		if err != nil {
			return nil, err
		}
		t.Files = files
		return renderer.Render(ctx, req)
	}, nil)
}

// usesCapabilities reports whether mi's render sees the cluster's capabilities: all
// of them for a chart, the Kubernetes version for a Timoni module.
func usesCapabilities(mi *cairnv1.ModuleInstance) bool {
	return moduleKindOf(mi) != nil && moduleKindOf(mi).seesCluster()
}

// digestFor is the digest of what mi's render sees of c (see usesCapabilities).
func (c *clusterCapabilities) digestFor(mi *cairnv1.ModuleInstance) string {
	if k := moduleKindOf(mi); k != nil {
		return k.capabilities(c)
	}
	return ""
}

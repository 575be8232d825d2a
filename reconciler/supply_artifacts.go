package reconciler

import (
	"context"
	"fmt"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/rendercache"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/render"
)

// ociModule is the OCI artifact mi's module is pulled from (a chart or a Timoni
// module of url), parsed; ok is false for the other modules.
func ociModule(mi *cairnv1.ModuleInstance) (ref supply.OCIRef, timoni, ok bool, err error) {
	if k := moduleKindOf(mi); k != nil {
		return k.oci()
	}
	return supply.OCIRef{}, false, false, nil
}

// verifyArtifacts resolves and checks, through sc, the OCI artifacts mi's render
// reads first-hand (its registry module and the catalogs, or its chart). Dependencies
// of registry modules are checked by the renderer as it fetches them, through the
// same per-sync resolutions.
func verifyArtifacts(ctx context.Context, sc *supply.Chain, p *cairnv1.Platform, mi *cairnv1.ModuleInstance) (
	[]cairnv1.ArtifactStatus, *chartInput, *outcome.Failure) {
	if ref, timoni, ok, err := ociModule(mi); ok {
		if err != nil {
			return nil, nil, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("%s/%s: %w", mi.Namespace, mi.Name, err))
		}
		out, artifact, f := sc.VerifyOCI(ctx, ref)
		if f != nil {
			return out, nil, f
		}
		in := &chartInput{Artifact: artifact}
		if timoni {
			in.timoni = mi.Spec.Module.Timoni
		}
		return out, in, nil
	}
	if k := moduleKindOf(mi); k != nil && k.registryModule() != nil {
		mods := []render.Catalog{{Module: k.registryModule().Path, Version: k.registryModule().Version}}
		for _, c := range p.Spec.Catalogs {
			mods = append(mods, render.Catalog{Module: c.Module, Version: c.Version})
		}
		out, f := sc.VerifyModules(ctx, p.Spec.ModuleRegistry, mods)
		return out, nil, f
	}
	return nil, nil, nil
}

// chartInput is a verified OCI artifact to pull by digest: a chart, or the Timoni
// module of timoni.
type chartInput struct {
	*supply.Artifact
	timoni *cairnv1.TimoniModule
}

// chartRenderer is a Renderer that also renders charts (render.Renderer, in its
// worker processes).
type chartRenderer interface {
	RenderChart(ctx context.Context, req render.ChartRequest) (*render.Result, error)
}

// renderChart pulls the verified chart by digest and renders it with renderer when
// it renders charts (else in this process), through the render cache (keyed by the
// chart digest and the whole request, the capabilities included) when one is given.
func renderChart(ctx context.Context, renderer Renderer, cache *rendercache.Cache, chart *chartInput, req render.Request,
	lookup render.Lookup) (*render.Result, bool, error) {
	return rendercache.Through(cache, cacheKey(req, "chart:"+chart.Display()), func() (*render.Result, error) {
		archive, err := chart.PullChart(ctx)
		if err != nil {
			return nil, err
		}
		chartReq := render.ChartRequest{
			Name: req.Name, Namespace: req.Namespace, Chart: chart.Display(), Archive: archive,
			Digest: chart.Digest, Values: req.Values, Limits: req.Limits, Capabilities: req.Capabilities,
			Lookup: lookup, Tenant: req.Tenant,
		}
		if cr, ok := renderer.(chartRenderer); ok {
			return cr.RenderChart(ctx, chartReq) // in the renderer's worker processes
		}
		return render.RenderChart(ctx, chartReq)
	}, func(res *render.Result) bool { return res.Lookups == 0 }) // a render that read the cluster is never reused
}

package reconciler

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/opencontainers/go-digest"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render"
)

// chartRef is a parsed module.chart or OCI module.timoni.
type chartRef struct {
	host, repo string
	tag        string // version (Helm's "+" is "_" in OCI tags)
	digest     string
}

func parseChart(c *cairnv1.ChartSource) (chartRef, error) {
	return parseOCI("chart", c.URL, c.Version, c.Digest)
}

// parseTimoni parses an OCI Timoni module (one with a url).
func parseTimoni(m *cairnv1.TimoniModule) (chartRef, error) {
	return parseOCI("Timoni module", m.URL, m.Version, m.Digest)
}

// parseOCI parses the url, version and digest of an OCI artifact of kind what.
func parseOCI(what, url, version, dgst string) (chartRef, error) {
	rest, ok := strings.CutPrefix(url, "oci://")
	if !ok {
		return chartRef{}, fmt.Errorf("%s url %q is not oci://host/repository", what, url)
	}
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" || strings.Contains(repo, "@") || strings.Contains(repo, ":") {
		return chartRef{}, fmt.Errorf("%s url %q is not oci://host/repository (put the version in version: and the digest in digest:)", what, url)
	}
	ref := chartRef{host: host, repo: strings.TrimSuffix(repo, "/"), tag: strings.ReplaceAll(version, "+", "_"), digest: dgst}
	if ref.digest != "" {
		if _, err := digest.Parse(ref.digest); err != nil {
			return chartRef{}, fmt.Errorf("%s digest %q: %w", what, ref.digest, err)
		}
	}
	if ref.tag == "" && ref.digest == "" {
		return chartRef{}, fmt.Errorf("%s %s needs a version or a digest", what, url)
	}
	return ref, nil
}

// ociModule is the OCI artifact mi's module is pulled from (a chart or a Timoni
// module of url), parsed; ok is false for the other modules.
func ociModule(mi *cairnv1.ModuleInstance) (ref chartRef, timoni, ok bool, err error) {
	if k := moduleKindOf(mi); k != nil {
		return k.oci()
	}
	return chartRef{}, false, false, nil
}

// verifyArtifacts resolves and checks the OCI artifacts mi's render reads
// first-hand (its registry module and the catalogs, or its chart). Dependencies of
// registry modules are checked by the renderer as it fetches them, through the same
// per-sync resolutions.
func (sc *supplyChain) verifyArtifacts(ctx context.Context, p *cairnv1.Platform, mi *cairnv1.ModuleInstance) (
	[]cairnv1.ArtifactStatus, *chartInput, *outcome.Failure) {
	var out []cairnv1.ArtifactStatus
	m := mi.Spec.Module
	if ref, timoni, ok, err := ociModule(mi); ok {
		if err != nil {
			return nil, nil, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("%s/%s: %w", mi.Namespace, mi.Name, err))
		}
		st, f := sc.registryForHost(ref.host)
		if f != nil {
			return nil, nil, f
		}
		res := sc.resolveChart(ctx, st, ref)
		out = append(out, res.status)
		if res.fail != nil {
			return out, nil, res.fail
		}
		in := &chartInput{ref: ref, st: st, digest: res.status.Digest}
		if timoni {
			in.timoni = m.Timoni
		}
		return out, in, nil
	}
	if k := moduleKindOf(mi); k != nil && k.registryModule() != nil {
		st := sc.regs[p.Spec.ModuleRegistry]
		if st == nil {
			return nil, nil, nil // the renderer reports the missing registry
		}
		mods := []render.Catalog{{Module: k.registryModule().Path, Version: k.registryModule().Version}}
		for _, c := range p.Spec.Catalogs {
			mods = append(mods, render.Catalog{Module: c.Module, Version: c.Version})
		}
		for _, mod := range mods {
			res := sc.resolve(ctx, st, render.ModuleRepository(render.ModuleRegistry{}, mod.Module), mod.Version)
			out = append(out, res.status)
			if res.fail != nil {
				return out, nil, res.fail
			}
		}
	}
	return out, nil, nil
}

// resolveChart resolves the chart's (or OCI Timoni module's) version once per sync. A
// declared digest is what is verified and pulled; with a version too, the version must
// still resolve to it.
func (sc *supplyChain) resolveChart(ctx context.Context, st *registryState, ref chartRef) *resolution {
	if ref.digest == "" {
		return sc.resolve(ctx, st, ref.repo, ref.tag)
	}
	if ref.tag != "" && st.failure == nil {
		desc, err := st.client.Resolve(ctx, ref.repo, ref.tag)
		var f *outcome.Failure
		switch {
		case err != nil:
			f = artifactFailure(err)
		case desc.Digest.String() != ref.digest:
			f = outcome.NewStalled(cairnv1.ReasonArtifactFailed, fmt.Errorf("%s:%s resolves to %s, not the declared digest %s",
				ref.host+"/"+ref.repo, ref.tag, desc.Digest, ref.digest))
		}
		if f != nil {
			return &resolution{fail: f, status: cairnv1.ArtifactStatus{
				Ref: ref.host + "/" + ref.repo + ":" + ref.tag, Digest: desc.Digest.String(),
				Verification: cairnv1.VerificationFailed, Reason: f.Reason, Message: f.Error()}}
		}
	}
	return sc.resolve(ctx, st, ref.repo, ref.digest)
}

// chartInput is a verified OCI artifact to pull by digest: a chart, or the Timoni
// module of timoni.
type chartInput struct {
	ref    chartRef
	st     *registryState
	digest string
	timoni *cairnv1.TimoniModule
}

func (c *chartInput) display() string {
	return "oci://" + c.ref.host + "/" + c.ref.repo + "@" + c.digest
}

// chartRenderer is a Renderer that also renders charts (render.Renderer, in its
// worker processes).
type chartRenderer interface {
	RenderChart(ctx context.Context, req render.ChartRequest) (*render.Result, error)
}

// renderChart pulls the verified chart by digest and renders it with renderer when
// it renders charts (else in this process), through the render cache (keyed by the
// chart digest and the whole request, the capabilities included) when one is given.
func renderChart(ctx context.Context, renderer Renderer, cache *renderCache, chart *chartInput, req render.Request,
	lookup render.Lookup) (*render.Result, bool, error) {
	return throughCache(cache, cacheKey(req, "chart:"+chart.display()), func() (*render.Result, error) {
		archive, err := chart.st.client.PullChart(ctx, chart.ref.repo, digest.Digest(chart.digest))
		if err != nil {
			return nil, artifactFailure(err)
		}
		chartReq := render.ChartRequest{
			Name: req.Name, Namespace: req.Namespace, Chart: chart.display(), Archive: archive,
			Digest: chart.digest, Values: req.Values, Limits: req.Limits, Capabilities: req.Capabilities,
			Lookup: lookup, Tenant: req.Tenant,
		}
		if cr, ok := renderer.(chartRenderer); ok {
			return cr.RenderChart(ctx, chartReq) // in the renderer's worker processes
		}
		return render.RenderChart(ctx, chartReq)
	}, func(res *render.Result) bool { return res.Lookups == 0 }) // a render that read the cluster is never reused
}

// markVerified sets the Verified condition from the artifacts of the attempt:
// True when all verified, False naming the first that did not; none for an
// instance without OCI artifacts.
func markVerified(mi *cairnv1.ModuleInstance, artifacts []cairnv1.ArtifactStatus) {
	if len(artifacts) == 0 {
		conditions.Delete(mi, cairnv1.VerifiedCondition)
		return
	}
	for _, a := range artifacts {
		switch a.Verification {
		case cairnv1.VerificationVerified:
			continue
		case cairnv1.VerificationFailed:
			conditions.MarkFalse(mi, cairnv1.VerifiedCondition, a.Reason, "%s: %s", a.Ref, a.Message)
		default:
			conditions.MarkFalse(mi, cairnv1.VerifiedCondition, cairnv1.ReasonNotVerified, "%s: %s", a.Ref, a.Message)
		}
		return
	}
	conditions.MarkTrue(mi, cairnv1.VerifiedCondition, cairnv1.ReasonVerified,
		"%d artifacts verified by digest with the Registry's cosign keys (key-based: no transparency log or certificate checks)", len(artifacts))
}

package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/crds"
	"cairn.dev/cairn/internal/fairslots"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/placement"
	"cairn.dev/cairn/reconciler/rendercache"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/reconciler/valuesfrom"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// renderAll renders the affected instances, at most Concurrency at once, and places
// their objects once all are rendered: a plan's renders, every verdict then being
// decided over all of them (a sync renders each instance on its own:
// RevisionState.startRenders). The slots are shared fairly between tenants
// (fairslots): each tenant's instances start in order, in turn with the other
// tenants', so that one tenant's many or slow renders never hold every slot while
// another's wait.
func (s *RevisionState) renderAll(ctx context.Context) {
	slots := fairslots.New(s.e.opts.Concurrency)
	wait := context.WithoutCancel(ctx) // every instance gets its turn; its render sees ctx
	var wg sync.WaitGroup
	for tenant, runs := range s.affectedByTenant() {
		wg.Go(func() {
			for _, r := range runs {
				_ = slots.Acquire(wait, tenant)
				wg.Go(func() {
					defer slots.Release(tenant)
					s.renderInstance(ctx, r)
				})
			}
		})
	}
	wg.Wait()
	s.placeAll(ctx)
}

// affectedByTenant returns the affected instances by the tenant that declares
// them ("" for the platform team's), each in the order of s.runs.
func (s *RevisionState) affectedByTenant() map[string][]*instanceState {
	out := map[string][]*instanceState{}
	for _, r := range s.runs {
		if r.affected {
			t := tenantOf(s.set, r.mi)
			out[t] = append(out[t], r)
		}
	}
	return out
}

// tenantOf names the tenant whose paths hold mi's declaration ("" for the platform
// team's).
func tenantOf(set *declarations.Set, mi *cairnv1.ModuleInstance) string {
	if t := set.Tenant(mi.Namespace, mi.Name); t != nil {
		return t.Name
	}
	return ""
}

// placeAll places the objects of every instance rendered this time and not placed
// yet, once all are rendered: a kind the cluster does not serve yet takes its scope
// from the CRD of the instance that provides it, whatever the order of the two
// (instances placed before, by settle, lend their CRDs' scopes too).
func (s *RevisionState) placeAll(ctx context.Context) {
	scopes := map[schema.GroupKind]bool{}
	for _, r := range s.runs {
		switch {
		case r.render.res != nil && s.mayPlaceCRDs(r):
			maps.Copy(scopes, crds.Scopes(r.render.res.Objects))
		case r.rendered != nil: // placed: its CRDs passed the placement
			maps.Copy(scopes, r.shape.scopes())
		}
	}
	sem := make(chan struct{}, s.e.opts.Concurrency)
	var wg sync.WaitGroup
	for _, r := range s.runs {
		if r.render.res == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.placeInstance(ctx, r, scopes)
		}()
	}
	wg.Wait()
}

// mayPlaceCRDs tells whether the CRDs of r's render are r's to place: only then
// do they give their kinds' scope to the other instances' objects (a tenant that
// renders a CRD it may not place cannot make another tenant's objects of that
// kind cluster-scoped; its own render fails on it).
func (in *revisionInput) mayPlaceCRDs(r *instanceState) bool {
	pl := in.placementFor(r.mi)
	for _, u := range r.render.res.Objects {
		if crds.Is(u) && pl.Check(u, false) != nil {
			return false
		}
	}
	return true
}

// renderInstance runs the render phase of r (renderOne) and keeps its result for
// the placement. renderOne recovers its own panics; the recover here covers the
// test hook and the progress line before it.
func (s *RevisionState) renderInstance(ctx context.Context, r *instanceState) {
	defer s.recoverInto(ctx, r, PhaseRender)
	s.step(r.key(), "render %s (%s)", r.key(), r.why)
	testHook(PhaseRender, r.key())
	render := s.renderOne
	if r.rollback != nil {
		render = func(ctx context.Context, _ *cairnv1.ModuleInstance, _ string) (rendering, *outcome.Failure) {
			return s.rollbackRender(ctx, r)
		}
	}
	out, f := render(ctx, r.mi, r.sourceDigest)
	r.render = out
	if f != nil {
		r.failure = f
	}
}

// rendering is what the render phase gives of one instance.
type rendering struct {
	// res is the render, its objects not placed yet (nil when it failed).
	res *render.Result
	// artifacts are the OCI artifacts the render uses, with their verification;
	// chart is the verified chart or Timoni module.
	artifacts []cairnv1.ArtifactStatus
	chart     *chartInput
	// masks are the strings of the Secrets spec.valuesFrom read, masked in every
	// message (see valuesfrom.MaskFailure).
	masks []string
	// took is how long the render itself took (spec.timeout bounds the render, the
	// apply and the health wait together); cached, whether the render cache had it.
	took   time.Duration
	cached bool
	// fromArtifact: the render is a published one, pulled and verified (a rollback).
	fromArtifact bool
}

// renderOne is the render phase of the instance mi (whose repository module has
// digest source, if it has one): it verifies the OCI artifacts mi uses, builds its
// render request, reads the values it takes from the cluster (spec.valuesFrom) and
// renders it, through the render cache, in a render worker. It returns the render,
// not placed yet, or why it failed, typed and with the Secrets' strings masked. A
// panic is its failure (InternalError), with what the phase had verified before it.
func (s *RevisionState) renderOne(ctx context.Context, mi *cairnv1.ModuleInstance, source string) (out rendering, f *outcome.Failure) {
	key := keyOf(mi).String()
	defer func() {
		if v := recover(); v != nil {
			out.res, f = nil, s.recovered(ctx, key, PhaseRender, v)
		}
	}()
	out.artifacts, out.chart, f = verifyArtifacts(ctx, s.supplyChain(ctx), s.platform, mi)
	if f != nil {
		return out, f
	}
	req, f := renderRequest(s.set, mi, s.root, s.rev.Tree, s.e.opts, s.supplyChain(ctx))
	if f != nil {
		return out, f
	}
	if out.chart != nil && out.chart.timoni == nil {
		if req.Capabilities, f = s.chartCapabilities(ctx, key); f != nil {
			return out, f
		}
	}
	if f = s.setKubeVersion(ctx, key, &req); f != nil {
		return out, f
	}
	if req.Values, out.masks, f = s.instanceValues(ctx, mi); f != nil {
		return out, f
	}
	cache := s.e.cache
	if len(mi.Spec.ValuesFrom) > 0 {
		cache = nil // its key would digest values from Secrets; such renders are not kept
	}
	began := time.Now()
	var err error
	switch {
	case s.platform.Spec.Render.Mode == cairnv1.RenderJob:
		// Every kind renders in the Job (docs/render-jobs.md); its cache key is its
		// own: a chart's `lookup` sees nothing there.
		id := moduleID(mi, source, out.artifacts)
		if out.chart != nil {
			id = out.chart.Display() // by digest
		}
		out.res, out.cached, err = rendercache.Through(cache, cacheKey(req, "job:"+id),
			func() (*render.Result, error) {
				return s.renderInJob(ctx, mi, req, out.chart, out.artifacts, out.masks)
			}, nil)
	case out.chart != nil && out.chart.timoni != nil:
		out.res, out.cached, err = renderTimoniArtifact(ctx, s.e.renderer, cache, out.chart, req)
	case out.chart != nil:
		out.res, out.cached, err = renderChart(ctx, s.e.renderer, cache, out.chart, req, s.chartLookup(ctx, mi))
	default:
		out.res, out.cached, err = s.e.renderCached(ctx, cache, req, moduleID(mi, source, out.artifacts))
	}
	out.took = time.Since(began)
	s.e.opts.Metrics.ObserveRender(moduleType(mi), out.cached, err, out.took)
	if out.cached {
		s.step(key, "render %s: cached", key)
	}
	if err != nil {
		return out, valuesfrom.MaskFailure(renderFailure(key, err), out.masks)
	}
	return out, nil
}

// placeInstance runs the placement phase of r's render (place) and keeps what it
// returns.
func (s *RevisionState) placeInstance(ctx context.Context, r *instanceState, scopes map[schema.GroupKind]bool) {
	defer s.recoverInto(ctx, r, "placement")
	res := r.render.res
	r.render.res = nil
	p, f := s.place(ctx, r, res, scopes)
	r.placedRender = p
	if f != nil {
		r.failure = valuesfrom.MaskFailure(f, r.render.masks)
	}
}

// placedRender is what the placement phase gives of an instance's render.
type placedRender struct {
	// rendered is the render with its digest keyed (see keyedDigest); objects are
	// its objects, placed: each with its scope, in a namespace the instance may
	// write, labelled with its owner. warnings are the render's non-fatal findings
	// (catalog skew under skewPolicy: Warn).
	rendered *render.Result
	objects  []*unstructured.Unstructured
	warnings []string
	// shape is what the verdicts over the revision read of objects (see
	// shapeOf): it stays once the instance's reconcile is done and objects
	// are released (see instanceState.releaseRender).
	shape *renderShape
	// published is the signed artifact the render was published as (nil: not
	// published).
	published *cairnv1.PublishedArtifact
}

// place is the placement phase of r's render res: it places and checks res's
// objects and hooks (see prepare), with the scopes of the kinds the revision's CRDs
// define, checks its generated Secrets, claims its objects for r in the revision
// (claimObjects), and publishes it. It returns the placed render, or why it may not
// be applied; a render that failed to publish is returned placed, with the failure.
func (s *RevisionState) place(ctx context.Context, r *instanceState, res *render.Result, scopes map[schema.GroupKind]bool) (placedRender, *outcome.Failure) {
	pl := s.placementFor(r.mi)
	// Hooks are placed and checked like the objects: no hook goes where an object
	// of the instance may not.
	owner := r.mi
	if mirrored := s.mirroredCR(r); mirrored != nil {
		owner = mirrored // the CR as written, with its UID (see applyInstance)
	}
	if err := prepare(append(slices.Clone(res.Objects), hooks.Objects(res.Hooks)...), owner, s.kinds, pl, scopes); err != nil {
		return placedRender{}, outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	if err := checkGeneratedSecrets(res.Objects, r.mi, pl); err != nil {
		return placedRender{}, outcome.Classify(cairnv1.ReasonSecretConflict, err)
	}
	if f := s.claimObjects(r, res.Objects); f != nil {
		return placedRender{}, f
	}
	p := placedRender{rendered: keyedDigest(res, s.digestKey), objects: res.Objects, warnings: res.Warnings, shape: shapeOf(res.Objects)}
	if t := r.rollback; t != nil { // the render of the history
		if !r.render.fromArtifact && p.rendered.Digest != t.RenderDigest {
			// Rendered again: applied only when it is the render that ran.
			return placedRender{}, outcome.NewStalled(cairnv1.ReasonRenderFailed, fmt.Errorf(
				"rollback of %s: rendering revision %s again gives %s, not %s as applied then (what the render reads from the cluster or a registry changed since); nothing applied",
				r.key(), t.Revision, p.rendered.Digest, t.RenderDigest))
		}
		p.rendered.Digest = t.RenderDigest
		if r.render.fromArtifact {
			p.published = t.Published // published and signed already
		}
		return p, nil
	}
	var f *outcome.Failure
	p.published, f = s.publish(ctx, r, p.objects, p.rendered.Digest)
	return p, f
}

// renderFailure types a render error: a registry that could not be reached, or a
// deadline that passed while every render worker was busy with other renders, is
// transient; everything else about a render is decided by its inputs and stalls.
func renderFailure(key string, err error) *outcome.Failure {
	if f := (*outcome.Failure)(nil); errors.As(err, &f) {
		// A refusal of the supply chain (a module's signature) keeps its type.
		return &outcome.Failure{Kind: f.Kind, Reason: f.Reason, Err: fmt.Errorf("failed to render %s: %w", key, err)}
	}
	reason := renderReason(err)
	err = fmt.Errorf("failed to render %s: %w", key, err)
	switch {
	case reason == render.ReasonFetchFailed, errors.Is(err, render.ErrWorkersBusy):
		return outcome.NewTransient(reason, err)
	case reason == render.ReasonLimitExceeded:
		return outcome.NewStalled(cairnv1.ReasonLimitExceeded, err)
	}
	return outcome.NewStalled(reason, err)
}

func renderReason(err error) string {
	if reason := render.Reason(err); reason != "" {
		return reason
	}
	return cairnv1.ReasonRenderFailed
}

// renderRequest builds the render input of mi from the declarations.
//
// root is the tree of the declarations path, which local and Timoni module paths
// are relative to; repo is the whole repository, which a kustomize path is relative
// to (as Flux's spec.path: a Kustomization under clusters/production builds
// apps/production).
func renderRequest(set *declarations.Set, mi *cairnv1.ModuleInstance, root, repo fs.FS, opts Options, sc *supply.Chain) (render.Request, *outcome.Failure) {
	p := set.Platform
	req := render.Request{
		Name: mi.Name, Namespace: mi.Namespace, Source: root, Tenants: tenantPaths(set), Tenant: tenantOf(set, mi),
		SkewPolicy: string(p.Spec.SkewPolicy), CacheDir: opts.RenderCacheDir, Limits: renderLimits(set, mi, opts),
	}
	if mi.Spec.Values != nil {
		req.Values = mi.Spec.Values.Raw
	}
	for _, c := range p.Spec.Catalogs {
		req.Catalogs = append(req.Catalogs, render.Catalog{Module: c.Module, Version: c.Version})
	}
	k := moduleKindOf(mi)
	if k == nil {
		return req, outcome.Failuref(outcome.Stalled, cairnv1.ReasonInvalidDeclaration,
			"%s: module needs one of cue, chart, local, kustomize or timoni", mi.Namespace+"/"+mi.Name)
	}
	var reg *render.ModuleRegistry
	if k.rendersWithRegistry() {
		var f *outcome.Failure
		if reg, f = sc.ModuleRegistry(p.Spec.ModuleRegistry); f != nil && k.usesModuleRegistry(p.Spec) {
			return req, f
		}
	}
	k.request(&req, repo, reg)
	return req, nil
}

// renderLimits are the engine's render limits with the memory budget and the module
// cap of mi's Platform limits, tightened by its tenant's.
func renderLimits(set *declarations.Set, mi *cairnv1.ModuleInstance, opts Options) render.Limits {
	l := opts.RenderLimits
	eff := set.Platform.Spec.Effective(set.Tenant(mi.Namespace, mi.Name))
	l.Memory, l.MaxModuleBytes = eff.RenderMemory, eff.MaxModuleBytes
	// spec.timeout bounds the render too (and what is left of it, the apply and the
	// health wait: see syncInstance); it never lengthens the render's own deadline.
	if t := mi.Spec.Timeout; t != nil && t.Duration > 0 {
		if l.Timeout <= 0 {
			l.Timeout = render.DefaultLimits().Timeout
		}
		l.Timeout = min(l.Timeout, t.Duration)
	}
	return l
}

// moduleID identifies the module source of r for the render cache: the digest of a
// local module's files, or the path and version of a registry module (registry
// versions are immutable).
func moduleID(mi *cairnv1.ModuleInstance, source string, artifacts []cairnv1.ArtifactStatus) string {
	if m := moduleKindOf(mi); m != nil && m.registryModule() != nil {
		id := m.registryModule().Path + "@" + m.registryModule().Version
		for _, a := range artifacts {
			id += "@" + a.Digest // the module and catalogs as resolved in this sync
		}
		return id
	}
	return source
}

// tenantPaths are the tenants' path globs of set's Platform, for the render: a
// symbolic link in a module may only lead to files of the link's owner.
func tenantPaths(set *declarations.Set) []render.TenantPaths {
	var out []render.TenantPaths
	for _, t := range set.Platform.Spec.Tenants {
		out = append(out, render.TenantPaths{Name: t.Name, Paths: t.Paths})
	}
	return out
}

// placementFor returns the placement of mi's objects in this sync.
func (in *revisionInput) placementFor(mi *cairnv1.ModuleInstance) placement.Placement {
	return placement.New(in.platform, in.set.Tenant(mi.Namespace, mi.Name), mi, in.e.namespace())
}

// Version is cairn's version; it is part of every render cache key, so a new cairn
// never reuses an older one's renders.
var Version = "dev"

// cacheKey is the render cache's key of req under this cairn's version.
func cacheKey(req render.Request, moduleID string) string {
	return rendercache.Key(Version, req, moduleID)
}

// renderCached renders req through the cache.
func (e *Engine) renderCached(ctx context.Context, cache *rendercache.Cache, req render.Request, moduleID string) (*render.Result, bool, error) {
	return rendercache.Through(cache, cacheKey(req, moduleID), func() (*render.Result, error) { return e.renderer.Render(ctx, req) }, nil)
}

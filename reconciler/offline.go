package reconciler

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/placement"
	"cairn.dev/cairn/reconciler/secretgen"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
	"cairn.dev/cairn/sign"
)

// Rendered is the render of one instance without a cluster.
type Rendered struct {
	Namespace, Name string
	Objects         []*unstructured.Unstructured
	// Hooks are a chart's Helm hooks, in the order they run (see render.HooksFor).
	Hooks    []render.Hook
	Digest   string
	Warnings []string
	// Artifacts are the OCI artifacts used, with their verification.
	Artifacts []cairnv1.ArtifactStatus
	// Generated names the Secrets the instance generates in the cluster
	// (spec.secrets, copies included): names only, their values exist nowhere else.
	Generated []string
	// DependsOn are the keys (namespace/name) of the instances it declares it depends on.
	DependsOn []string
	Err       error
}

// RenderOffline loads the declarations of rev and renders the instances that match
// filter ("" or "namespace/name"), with no cluster access. Objects carry cairn's
// labels as a sync would set them (without the instance UID).
func RenderOffline(ctx context.Context, renderer Renderer, rev Revision, opts Options, filter string) ([]Rendered, error) {
	return renderOffline(ctx, renderer, rev, opts, filter, &sign.Verifier{})
}

// renderOffline is RenderOffline with the verification cache of the caller.
func renderOffline(ctx context.Context, renderer Renderer, rev Revision, opts Options, filter string,
	verifier *sign.Verifier) ([]Rendered, error) {
	root, err := rev.Tree.Sub(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("failed to open path %s: %w", opts.Path, err)
	}
	set, err := declarations.Load(root, declarations.Options{Root: opts.Path, CairnNamespace: opts.cairnNamespace()})
	if err != nil {
		return nil, err
	}
	sc := newSupplyChain(ctx, opts.Secrets, opts, verifier, set.Platform, set.Registries)
	var out []Rendered
	for _, inv := range set.Invalid {
		if filter == "" || filter == inv.Object {
			ns, name := splitKey(inv.Object)
			out = append(out, Rendered{Namespace: ns, Name: name, Err: inv})
		}
	}
	for _, mi := range set.Instances {
		if filter != "" && filter != mi.Namespace+"/"+mi.Name {
			continue
		}
		out = append(out, renderOne(ctx, renderer, set, mi, root, rev.Tree, opts, sc))
	}
	if filter != "" && len(out) == 0 {
		return nil, fmt.Errorf("instance %s is not declared", filter)
	}
	return out, nil
}

func renderOne(ctx context.Context, renderer Renderer, set *declarations.Set, mi *cairnv1.ModuleInstance,
	root, repo fs.FS, opts Options, sc *supply.Chain) Rendered {
	out := Rendered{Namespace: mi.Namespace, Name: mi.Name, DependsOn: declarations.DependencyIDs(mi)}
	artifacts, chart, f := verifyArtifacts(ctx, sc, set.Platform, mi)
	out.Artifacts = artifacts
	if f != nil {
		out.Err = f
		return out
	}
	req, f := renderRequest(set, mi, root, repo, opts, sc)
	if f != nil {
		out.Err = f
		return out
	}
	var res *render.Result
	var err error
	if req.Timoni != nil && opts.Capabilities != nil {
		req.Timoni.KubeVersion = opts.Capabilities.KubeVersion
	}
	switch {
	case chart != nil && chart.timoni != nil:
		res, _, err = renderTimoniArtifact(ctx, renderer, nil, chart, req)
	case chart != nil:
		req.Capabilities = opts.Capabilities
		res, _, err = renderChart(ctx, renderer, nil, chart, req, nil) // no cluster: lookup is empty
	default:
		res, err = renderer.Render(ctx, req)
	}
	if err != nil {
		out.Err = err
		return out
	}
	for _, u := range append(slices.Clone(res.Objects), hooks.Objects(res.Hooks)...) {
		setOwnerLabels(u, mi)
	}
	out.Hooks = res.Hooks
	// No cluster, so no cluster key: a key of this process keeps the digest opaque.
	out.Objects, out.Digest, out.Warnings = res.Objects, keyedDigest(res, offlineKey()).Digest, res.Warnings
	if len(mi.Spec.ValuesFrom) > 0 {
		out.Warnings = append(out.Warnings, "spec.valuesFrom is read from the cluster when syncing: rendered without it")
	}
	out.Generated = describeIDs(secretgen.Inventory(mi))
	pl := placement.New(set.Platform, set.Tenant(mi.Namespace, mi.Name), mi, opts.cairnNamespace())
	if out.Err = pl.CheckObjects(append(slices.Clone(res.Objects), hooks.Objects(res.Hooks)...)); out.Err == nil {
		out.Err = checkGeneratedSecrets(res.Objects, mi, pl)
	}
	return out
}

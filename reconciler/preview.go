package reconciler

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/internal/graph"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/valuesfrom"
)

// Plan is what a sync of a revision would do to the live cluster.
type Plan struct {
	Revision  string         `json:"revision"`
	Base      string         `json:"base,omitempty"`
	Instances []InstancePlan `json:"instances"`
	// Error is set when the revision's declarations cannot be used.
	Error string `json:"error,omitempty"`
	// Graph is the instance graph: dependsOn and contract edges, the instances
	// the revision affects and those that fail or wait marked.
	Graph graph.Graph `json:"graph"`
}

// InstancePlan is what a sync would do to one instance.
type InstancePlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Action is Create, Update, Unchanged, Delete, Skip or Error.
	Action    outcome.PlanAction `json:"action"`
	Why       string             `json:"why,omitempty"`
	Create    []string           `json:"create,omitempty"`
	Configure []string           `json:"configure,omitempty"`
	Unchanged int                `json:"unchanged,omitempty"`
	Prune     []string           `json:"prune,omitempty"`
	// Adopt lists the existing objects no instance owns that the instance takes over
	// (spec.adopt).
	Adopt []string `json:"adopt,omitempty"`
	// Orphan lists the objects a removed instance with prune: false leaves in place.
	Orphan []string `json:"orphan,omitempty"`
	// PruneVerdict says whether the guards would let the prune happen.
	PruneVerdict string `json:"pruneVerdict,omitempty"`
	Error        string `json:"error,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Diff is the rendered diff from the base revision (PlanChange only).
	Diff string `json:"diff,omitempty"`
	// RenderDigest is the digest of the render the plan made: once the change is
	// synced, the instance's history says whether it was applied as planned.
	RenderDigest string `json:"renderDigest,omitempty"`
	// Artifacts are the OCI artifacts the render uses and how each verified.
	Artifacts []cairnv1.ArtifactStatus `json:"artifacts,omitempty"`
	// Publish is where the render would be published, when the Platform publishes.
	Publish string `json:"publish,omitempty"`
	// Warnings are non-fatal findings of the render, e.g. catalog skew under
	// skewPolicy: Warn.
	Warnings []string `json:"warnings,omitempty"`
	// Secrets are the generated Secrets (spec.secrets): create, keep or rotate, never a value.
	Secrets []SecretPlan `json:"secrets,omitempty"`
	// Hooks are the Helm hooks the sync would run, in order (not among Create,
	// Configure or Prune: hooks are not in the inventory).
	Hooks []HookPlan `json:"hooks,omitempty"`
	// Provides and Requires are the instance's provider contracts, as the sync
	// would record them in its status.
	Provides []string                      `json:"provides,omitempty"`
	Requires []cairnv1.ContractRequirement `json:"requires,omitempty"`
}

// HookPlan is one Helm hook a sync would run, as a plan lists it (hooks.Plan).
type HookPlan = hooks.Plan

// ArtifactLine describes one artifact's verification in one line.
func ArtifactLine(a cairnv1.ArtifactStatus) string {
	line := a.Verification + " " + a.Ref
	if a.Digest != "" && !strings.Contains(a.Ref, "@") {
		line += "@" + a.Digest
	}
	switch {
	case a.KeyID != "":
		line += " (key " + a.KeyID + ")"
	case a.Message != "":
		line += " (" + a.Message + ")"
	}
	return line
}

// Failed reports whether the plan holds errors.
func (p *Plan) Failed() bool {
	if p.Error != "" {
		return true
	}
	for _, i := range p.Instances {
		if i.Error != "" {
			return true
		}
	}
	return false
}

// Plan computes, read-only, what Sync(rev) would do: the same declarations, affected
// set, render and prune guards, then a server-side dry-run of each object as the
// instance's ServiceAccount.
func (e *Engine) Plan(ctx context.Context, rev Revision) (*Plan, error) {
	plan := &Plan{Revision: rev.SHA, Base: rev.Base}
	root, err := rev.Tree.Sub(e.opts.Path)
	if err != nil {
		return nil, fmt.Errorf("failed to open path %s: %w", e.opts.Path, err)
	}
	set, err := e.load(ctx, root)
	if err != nil {
		plan.Error = err.Error()
		return plan, nil
	}
	s, err := e.newRevision(ctx, rev, root, set, true)
	if err != nil {
		return nil, err
	}
	s.prepare(ctx)
	s.render(ctx)
	for _, r := range s.runs {
		plan.Instances = append(plan.Instances, s.previewInstance(ctx, r))
	}
	for _, live := range s.removed {
		plan.Instances = append(plan.Instances, s.previewRemoval(ctx, live))
	}
	for _, live := range s.held {
		f := s.heldFailure(live)
		plan.Instances = append(plan.Instances, InstancePlan{Namespace: live.Namespace, Name: live.Name, Action: outcome.PlanError,
			Reason: f.Reason, Error: f.Error(), PruneVerdict: "refused: its file could not be read"})
	}
	for _, inv := range set.Invalid {
		ns, name := splitKey(inv.Object)
		plan.Instances = append(plan.Instances, InstancePlan{Namespace: ns, Name: name, Action: outcome.PlanError, Reason: inv.Reason, Error: inv.Error()})
	}
	sort.SliceStable(plan.Instances, func(i, j int) bool {
		a, b := plan.Instances[i], plan.Instances[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	plan.Graph = s.planGraph(plan.Instances)
	return plan, nil
}

func (s *RevisionState) previewInstance(ctx context.Context, r *instanceState) InstancePlan {
	ip := s.previewRendered(ctx, r)
	ip.Error = valuesfrom.Mask(ip.Error, r.render.masks)
	ip.Provides, ip.Requires = s.contracts.ProvidedNames(r.key()), s.contracts.Requirements(r.key())
	return ip
}

func (s *RevisionState) previewRendered(ctx context.Context, r *instanceState) InstancePlan {
	ip := InstancePlan{Namespace: r.mi.Namespace, Name: r.mi.Name, Why: r.why, Artifacts: r.render.artifacts, Warnings: r.warnings}
	if r.rendered != nil {
		ip.RenderDigest = r.rendered.Digest
	}
	if pub := s.platform.Spec.Render.Publish; pub != nil && r.rendered != nil {
		ip.Publish = fmt.Sprintf("%s %s/%s/%s:%s", pub.Registry, strings.Trim(pub.Repository, "/"),
			r.mi.Namespace, r.mi.Name, strings.ReplaceAll(r.rendered.Digest, ":", "-"))
	}
	switch {
	case r.suspended():
		ip.Action = outcome.PlanSkip
		return ip
	case r.held:
		ip.Action, ip.Reason = outcome.PlanSkip, cairnv1.ReasonHeld
		return ip
	case !r.affected:
		ip.Action = outcome.PlanUnchanged
		s.previewGenerated(ctx, r, &ip)
		return ip
	case r.failure != nil:
		ip.Action, ip.Reason, ip.Error = outcome.PlanError, r.failure.Reason, r.failure.Error()
		return ip
	}
	x := r.reconcileOn(r.was) // what a reconcile of r would do
	_, adopted, f := s.checkOwnership(ctx, x)
	if f != nil {
		ip.Action, ip.Reason, ip.Error = outcome.PlanError, f.Reason, f.Error()
		return ip
	}
	ip.Adopt = adopted
	ip.Action = outcome.PlanUpdate
	if r.was == nil {
		ip.Action = outcome.PlanCreate
	}
	s.dryRun(ctx, x, &ip)
	s.previewHooks(ctx, x, &ip)
	s.previewPrune(&r.instanceVerdicts, &ip)
	s.previewGenerated(ctx, r, &ip)
	return ip
}

func (in *revisionInput) dryRun(ctx context.Context, r *instanceReconcile, ip *InstancePlan) {
	owner := r.mi
	if r.live != nil {
		owner = r.live
	}
	m, err := in.e.cluster.Manager(r.mi.Namespace, in.serviceAccount(r.mi))
	if err != nil {
		ip.Error = err.Error()
		return
	}
	opts := ssa.DefaultDiffOptions()
	opts.ForceSelector = map[string]string{cairnv1.ForceAnnotation: "true"}
	created := in.namespacesCreated(ctx, r)
	for _, u := range r.objects {
		setOwnerLabels(u, owner)
		if created[u.GetNamespace()] {
			ip.Create = append(ip.Create, apply.Describe(u))
			continue
		}
		if apply.IsJob(u) && apply.JobApplied(r.oldInv, u) && !apply.Forced(u) {
			ip.Unchanged++ // a Job that ran is left as it is
			continue
		}
		entry, _, _, err := m.Diff(ctx, u, opts)
		if err != nil {
			ip.Action, ip.Reason, ip.Error = outcome.PlanError, cairnv1.ReasonApplyFailed, err.Error()
			return
		}
		switch entry.Action {
		case ssa.CreatedAction:
			ip.Create = append(ip.Create, apply.Describe(u))
		case ssa.ConfiguredAction:
			ip.Configure = append(ip.Configure, apply.Describe(u))
		default:
			ip.Unchanged++
		}
	}
}

func (in *revisionInput) previewPrune(r *instanceVerdicts, ip *InstancePlan) {
	if r.prune == nil || len(r.prune.Stale) == 0 {
		if r.pruneErr != nil {
			ip.PruneVerdict = r.pruneErr.Error()
		}
		return
	}
	ip.Prune = describeIDs(r.prune.Stale)
	ip.PruneVerdict = "allowed"
	if err := in.pruneRefusal(r); err != nil {
		ip.PruneVerdict = err.Error()
	}
}

func (s *RevisionState) previewRemoval(ctx context.Context, live *cairnv1.ModuleInstance) InstancePlan {
	ip := InstancePlan{Namespace: live.Namespace, Name: live.Name, Action: outcome.PlanDelete, Why: "removed from Git", PruneVerdict: "allowed"}
	rs := s.removedSets[live.Namespace+"/"+live.Name]
	if rs.err != nil {
		ip.Error = rs.err.Error()
		return ip
	}
	ip.Prune = describeIDs(rs.Stale)
	if pruneEnabled(live) {
		deleteHooks, err := s.previewDeleteHooks(ctx, live)
		if err != nil {
			ip.Error = err.Error()
		}
		ip.Hooks = deleteHooks
	}
	if len(rs.orphan) > 0 {
		ip.Orphan = describeIDs(rs.orphan)
		ip.Why = fmt.Sprintf("removed from Git, prune: false: orphan %d objects", len(ip.Orphan))
	}
	if rs.Refused != nil {
		ip.PruneVerdict = rs.Refused.Error()
	}
	return ip
}

func describeIDs(inv apply.Inventory) []string {
	objs, err := inv.Objects()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(objs))
	for _, u := range objs {
		out = append(out, apply.Describe(u))
	}
	return out
}

// namespacesCreated lists the namespaces the sync would create before applying r's
// objects (the instance's own, and Namespaces in the render) that do not exist yet:
// a dry-run of an object in them would fail, and every object in them is a creation.
func (in *revisionInput) namespacesCreated(ctx context.Context, r *instanceReconcile) map[string]bool {
	candidates := map[string]bool{r.mi.Namespace: true}
	for _, u := range r.objects {
		if u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "" {
			candidates[u.GetName()] = true
		}
	}
	out := map[string]bool{}
	for name := range candidates {
		var ns corev1.Namespace
		if err := in.e.cluster.client.Get(ctx, client.ObjectKey{Name: name}, &ns); apierrors.IsNotFound(err) {
			out[name] = true
		}
	}
	return out
}

package reconciler

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
)

// DriftReport is what a drift check found on one instance.
type DriftReport struct {
	Namespace, Name string
	Policy          cairnv1.DriftPolicy
	// Drifted names the objects that differ from the render or are missing.
	Drifted []string
	// Corrected counts the objects re-applied (policy Correct).
	Corrected int
	// Rotated names the generated Secrets replaced because rotateAfter elapsed.
	Rotated []string
	// Foreign names the drifted objects that, on the live object, are no longer the
	// instance's (relabelled to another instance or stripped of cairn's labels): a
	// drift check leaves them alone.
	Foreign []string
	// Resync says the instance was left alone because a sync must render it again
	// first: it is a chart instance and the cluster's capabilities changed since its
	// last sync (an API newly served), so its render now could hold objects its
	// inventory does not.
	Resync bool
	Err    error
}

// CheckDrift compares the live objects of every ready instance with its render
// (server-side dry-run per object: the sync path never does this), then re-applies
// drifted objects (drift: Correct, the default), or reports them in a Drifted
// condition (Warn). Instances with drift: Ignore, suspended or not ready are skipped.
func (e *Engine) CheckDrift(ctx context.Context, rev Revision) ([]DriftReport, error) {
	return e.CheckDriftOf(ctx, rev, nil)
}

// CheckDriftOf is CheckDrift without the instances for which skip (when not nil)
// is true, keyed "namespace/name". Once ctx ends it starts no other instance, and
// those in flight stop at their next request: the reports are of the instances it
// started, and one with an error may have been cut short. A caller that has to
// yield to a sync cancels ctx and goes on later, skipping what it has checked.
func (e *Engine) CheckDriftOf(ctx context.Context, rev Revision, skip func(key string) bool) ([]DriftReport, error) {
	root, err := rev.Tree.Sub(e.opts.Path)
	if err != nil {
		return nil, fmt.Errorf("failed to open path %s: %w", e.opts.Path, err)
	}
	set, err := e.load(ctx, root)
	if err != nil {
		return nil, err
	}
	s, err := e.newRevision(ctx, rev, root, set, true)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		reports []DriftReport
		wg      sync.WaitGroup
		sem     = make(chan struct{}, e.opts.Concurrency)
	)
	for _, mi := range set.Instances {
		key := mi.Namespace + "/" + mi.Name
		live := s.live[key]
		if !driftCheckable(mi, live, e.opts.Revisions != nil) || (skip != nil && skip(key)) {
			continue
		}
		select {
		case <-ctx.Done():
		case sem <- struct{}{}:
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			rep := s.checkInstanceDrift(ctx, mi, live)
			mu.Lock()
			reports = append(reports, rep)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reports, nil
}

func driftCheckable(mi, live *cairnv1.ModuleInstance, canRenderAgain bool) bool {
	// A held instance is checked against the render it is held at, never the
	// head's: pulled from its published artifact, or rendered again at its revision
	// (read from Git, the render's digest checked against the one held), as a
	// rollback does.
	if h := heldRender(live); status.HoldRequested(live) != nil && (h == nil || h.Published == nil && !canRenderAgain) {
		return false
	}
	return live != nil && status.IsReady(live) && !mi.Spec.Suspend && !status.SuspendAnnotated(live) &&
		mi.Spec.Drift != cairnv1.DriftIgnore
}

// heldRender is the render live is held at, as a render of its history (nil: not
// held yet, or held at no render).
func heldRender(live *cairnv1.ModuleInstance) *cairnv1.HistoryEntry {
	h := live.Status.Held
	if h == nil || h.RenderDigest == "" || h.Revision == "" {
		return nil
	}
	return &cairnv1.HistoryEntry{Revision: h.Revision, RenderDigest: h.RenderDigest, Published: h.Published}
}

func (s *RevisionState) checkInstanceDrift(ctx context.Context, mi, live *cairnv1.ModuleInstance) DriftReport {
	rep := DriftReport{Namespace: mi.Namespace, Name: mi.Name, Policy: driftPolicy(mi)}
	r := &instanceState{instancePlan: instancePlan{mi: mi, was: live, why: "drift check"}}
	held := status.HoldRequested(live) != nil
	if held {
		r.rollback = heldRender(live) // the render it is held at: from its artifact, or rendered again
	}
	if usesCapabilities(mi) {
		s.capabilities(ctx)
	}
	if !held && s.capabilitiesChanged(&r.instancePlan) {
		rep.Resync = true
		return rep
	}
	r.sourceDigest, r.sourceDirs = s.repositorySource(mi)
	s.renderInstance(ctx, r)
	if r.render.res != nil { // the kinds of a ready instance are served: no other instance's CRDs needed
		s.placeInstance(ctx, r, nil)
	}
	if r.failure != nil {
		rep.Err = r.failure
		return rep
	}
	m, err := s.e.cluster.Manager(mi.Namespace, s.serviceAccount(mi))
	if err != nil {
		rep.Err = err
		return rep
	}
	inv, err := s.e.inventories().Load(ctx, live)
	if err != nil {
		rep.Err = err
		return rep
	}
	drifted, foreign, err := driftedObjects(ctx, m, apply.WithoutAppliedJobs(r.objects, inv), live)
	if err != nil {
		rep.Err = err
		return rep
	}
	rep.Foreign = foreign
	for _, u := range drifted {
		rep.Drifted = append(rep.Drifted, apply.Describe(u))
	}
	if !held { // a held instance's generated Secrets stay as they are, as the rest of it
		if rep.Err = s.driftSecrets(ctx, m.Client(), mi, live, &rep); rep.Err != nil {
			return rep
		}
	}
	rep.Corrected, rep.Err = s.actOnDrift(ctx, m, live, rep, drifted)
	return rep
}

func driftPolicy(mi *cairnv1.ModuleInstance) cairnv1.DriftPolicy {
	if mi.Spec.Drift == "" {
		return cairnv1.DriftCorrect
	}
	return mi.Spec.Drift
}

// driftedObjects returns the rendered objects whose live state differs from what
// cairn would apply, or that are missing, and, apart, those of them that the live
// object no longer says are the instance's (see ownedBy): those are not corrected.
func driftedObjects(ctx context.Context, m *ssa.ResourceManager, objects []*unstructured.Unstructured,
	live *cairnv1.ModuleInstance) (drifted []*unstructured.Unstructured, foreign []string, err error) {
	opts := ssa.DefaultDiffOptions()
	key := cairnv1.InstanceKey(live.Namespace, live.Name)
	for _, u := range objects {
		setOwnerLabels(u, live)
		entry, existing, _, err := m.Diff(ctx, u, opts)
		if err != nil {
			return nil, nil, outcome.Classify(cairnv1.ReasonApplyFailed, err)
		}
		switch {
		case entry.Action == ssa.ConfiguredAction && existing != nil && !apply.OwnedBy(existing, key, string(live.UID)):
			foreign = append(foreign, apply.Describe(u))
		case entry.Action == ssa.CreatedAction || entry.Action == ssa.ConfiguredAction:
			drifted = append(drifted, u)
		}
	}
	return drifted, foreign, nil
}

// actOnDrift corrects or reports the drift and records the Drifted condition;
// rep already holds what driftSecrets found and corrected of the generated Secrets.
func (in *revisionInput) actOnDrift(ctx context.Context, m *ssa.ResourceManager, live *cairnv1.ModuleInstance,
	rep DriftReport, drifted []*unstructured.Unstructured) (int, error) {
	before := live.DeepCopy()
	defer in.e.emitDrift(before, live)
	corrected := rep.Corrected
	switch {
	case len(rep.Drifted) == 0:
		conditions.Delete(live, cairnv1.DriftedCondition)
	case rep.Policy == cairnv1.DriftCorrect:
		if len(drifted) > 0 {
			res, err := apply.Objects(ctx, m, drifted, apply.Inventory{}, in.digestKey, in.timeout(live), nil)
			corrected += len(res.Applied)
			if err != nil {
				return corrected, err
			}
		}
		conditions.MarkFalse(live, cairnv1.DriftedCondition, "DriftCorrected", "re-applied %d drifted object(s): %s",
			corrected, strings.Join(rep.Drifted, ", "))
	default:
		conditions.MarkTrue(live, cairnv1.DriftedCondition, "DriftDetected", "%d object(s) differ from Git: %s",
			len(rep.Drifted), strings.Join(rep.Drifted, ", "))
	}
	return corrected, patchStatus(ctx, in.e.cluster.client, live, before)
}

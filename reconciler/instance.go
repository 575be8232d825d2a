package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/placement"
	"cairn.dev/cairn/reconciler/shard"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/reconciler/valuesfrom"
)

// syncInstance reconciles e, whose render has settled, holding an apply slot that
// release gives back: it takes the CR the revision step wrote, then applies,
// prunes and waits, and records the outcome (an instanceReconcile); e keeps its
// result.
func (s *RevisionState) syncInstance(ctx context.Context, e *instanceState, release func()) {
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, max(s.timeout(e.mi)-e.render.took, time.Second)) // the render took its share
	defer cancel()
	mirrored, err := s.takeMirrored(e)
	if err != nil {
		r := e.reconcileOn(e.was)
		r.started = started
		r.setFailure(outcome.Classify(cairnv1.ReasonApplyFailed, err))
		r.interrupt(ctx)
		s.e.opts.Reporter.InstanceFinished(s.rev.SHA, keyOf(r.mi), r.result())
		e.done(r)
		return
	}
	r := e.reconcileOn(mirrored)
	r.started, r.release = started, release
	before := r.live.DeepCopy()
	if r.failure == nil {
		w, f := s.applyInstance(ctx, r)
		r.wrote = w
		r.setFailure(s.explainIdentity(r.mi, f))
	}
	s.record(ctx, r, before)
	s.collectPublished(ctx, r) // after the status write, bounded: best effort
	e.done(r)
}

// written is what the apply phase of an instance did (applyInstance), as the
// status it records and its result read it.
type written struct {
	// desired is the inventory the apply goes towards: the objects rendered, the
	// generated Secrets, and the withdrawn CRDs still in use.
	desired apply.Inventory
	// persisted is the inventory recorded before the first write (see
	// pendingInventory), nil when none was needed.
	persisted *cairnv1.Inventory
	// adopted are the existing objects no instance owned that it took over.
	adopted []string
	// report is the apply layer's: each object's change, the ids the API server
	// accepted, its answers (for the health check), and whether a failed apply left
	// nothing written.
	report apply.Report
	// pruned is what the prune deleted; hooksRan counts the Helm hooks run, by event
	// ("2 pre-install").
	pruned   *ssa.ChangeSet
	hooksRan []string
	// applied: every rendered object was applied (what came after may still have
	// failed: secrets, prune, health, hooks), so the render enters the history.
	applied bool
}

// inlineWait bounds a wait inside a sync (CRDs to be established, pruned objects to
// be gone) by Options.HealthWait, so that an object that never settles (a finalizer
// nobody removes) holds back neither the next poll nor the instances after it: the
// instance fails as transient and the next attempt picks up where this one stopped.
func (in *revisionInput) inlineWait(timeout time.Duration) time.Duration {
	if hw := in.e.opts.HealthWait; hw > 0 && hw < timeout {
		return hw
	}
	return timeout
}

func (in *revisionInput) timeout(mi *cairnv1.ModuleInstance) time.Duration {
	if mi.Spec.Timeout != nil && mi.Spec.Timeout.Duration > 0 {
		return mi.Spec.Timeout.Duration
	}
	return in.e.opts.DefaultTimeout
}

// writeInput writes r's input into its CR, creating its namespace when missing: the
// spec from Git and the annotations that say which input it is (see
// instanceAnnotations). It returns the CR as written.
func (s *RevisionState) writeInput(ctx context.Context, r *instanceState) (*cairnv1.ModuleInstance, error) {
	if err := s.ensureNamespace(ctx, r.mi.Namespace); err != nil {
		return nil, err
	}
	mi := r.mi.DeepCopy()
	if err := mirror(ctx, s.e.cluster.client, mi, s.instanceAnnotations(&r.instancePlan)); err != nil {
		return nil, err
	}
	return mi, nil
}

// writeInputs is the revision step's write: the input of every instance the
// revision affects goes into its CR, at most Options.ApplyConcurrency at once, before
// anything renders; an instance the revision does not affect is not written to (a
// commit that changes no instance's input writes no ModuleInstance). Until its
// reconcile starts, an instance's plan, render and prune verdicts still see the CR as
// it was (r.was); the reconcile works on the CR as written (takeMirrored).
func (s *RevisionState) writeInputs(ctx context.Context) {
	sem := make(chan struct{}, max(s.e.opts.ApplyConcurrency, 1))
	var wg sync.WaitGroup
	for _, r := range s.runs {
		if !r.affected && !r.held && !status.IsHeld(r.was) && status.ReleaseRequested(r.was) == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := s.endHold(ctx, r)
			if err != nil {
				s.e.logger(ctx).Error(err, "hold", "instance", r.key(), "revision", s.rev.SHA)
			}
			if !r.affected { // a hold to record, or a release while nothing changed
				if err == nil {
					s.recordHold(ctx, r)
				}
				return
			}
			if err != nil { // not applied while its hold stands: retried at the next revision
				r.mirrorErr = err
				return
			}
			r.mirrored, r.mirrorErr = s.writeInput(ctx, r)
		})
	}
	wg.Wait()
}

// takeMirrored is a copy of the CR the revision step wrote r's input into, for r's
// reconcile to work on (the revision keeps the CR as written: a replica's may be
// r.was, which the verdicts read), or why there is none.
func (s *RevisionState) takeMirrored(r *instanceState) (*cairnv1.ModuleInstance, error) {
	if r.mirrorErr != nil {
		return nil, r.mirrorErr
	}
	mirrored := s.mirroredCR(r)
	if mirrored == nil {
		return nil, fmt.Errorf("the input of %s was not written at this revision", r.key())
	}
	return mirrored.DeepCopy(), nil
}

// mirroredCR is the CR the revision step wrote for r as this process knows it (nil:
// none yet). A replica's state may take it while other instances render (see
// RevisionState.Take), so it is read under s.mu (the cluster view's lock, which
// also guards the plan's mirrored CRs: see clusterView).
func (s *RevisionState) mirroredCR(r *instanceState) *cairnv1.ModuleInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return r.mirrored
}

// applyInstance is the apply phase of r: it applies the rendered objects as the
// instance's ServiceAccount, prunes what left the render when allowed, waits for the
// changed objects to be healthy and runs its hooks, and returns what it wrote, with
// why it failed. A panic is recovered into its failure (see recover.go), with what
// was written before it, so that the outcome is still recorded.
func (s *RevisionState) applyInstance(ctx context.Context, r *instanceReconcile) (w written, f *outcome.Failure) {
	defer func() {
		if v := recover(); v != nil {
			f = s.recovered(ctx, r.key(), PhaseApply, v)
		}
	}()
	testHook(PhaseApply, r.key())
	// Placement labelled the objects with the CR the revision step wrote; they are
	// labelled again only if it has been replaced since (a new UID). The verdicts
	// over the revision read the render's shape, never these labels.
	for _, u := range append(slices.Clone(r.objects), hooks.Objects(r.hooks())...) {
		if u.GetLabels()[cairnv1.InstanceUIDLabel] != string(r.live.UID) {
			setOwnerLabels(u, r.live)
		}
	}
	w.desired = r.desiredInventory(s.digestKey).Union(r.withheld) // a withdrawn CRD in use stays r's
	m, err := s.e.cluster.Manager(r.mi.Namespace, s.serviceAccount(r.mi))
	if err != nil {
		return w, outcome.NewTransient(cairnv1.ReasonApplyFailed, err)
	}
	valid, adopted, f := s.checkOwnership(ctx, r)
	if f != nil {
		return w, f
	}
	if w.adopted = adopted; len(adopted) > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("adopted %d existing object(s): %s", len(adopted), strings.Join(adopted, ", ")))
	}
	if w.persisted, err = s.persistInventory(ctx, r, pendingInventory(r.oldInv, w.desired)); err != nil {
		return w, outcome.NewTransient(cairnv1.ReasonApplyFailed, err)
	}
	if f := s.readInstanceSecrets(ctx, m.Client(), r); f != nil {
		return w, f
	}
	pre, post, f := s.hookPhases(ctx, r)
	if f == nil {
		f = s.writeSecretsForHooks(ctx, m.Client(), r, pre) // a hook may mount one
	}
	if f == nil {
		f = s.runPreHooks(ctx, m.Client(), r, pre, &w.hooksRan)
	}
	if f != nil {
		return w, f
	}
	s.step(r.key(), "apply %s: %d objects", r.key(), len(r.objects))
	rep, err := apply.Objects(ctx, m, r.objects, s.applyBaseline(r), s.digestKey, s.inlineWait(s.timeout(r.mi)), valid)
	w.report = *rep
	r.warnings = append(r.warnings, rep.Notes...)
	if err != nil {
		return w, outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	w.applied = true
	if f := s.writeSecrets(ctx, m.Client(), r); f != nil {
		return w, f
	}
	if w.pruned, f = s.pruneInstance(ctx, m, r); f != nil {
		return w, f
	}
	if f := s.awaitInstance(ctx, m.Client(), r, w.report.Live); f != nil {
		return w, f
	}
	f = s.runHooks(ctx, m.Client(), r, post, &w.hooksRan) // post-install/upgrade: once healthy
	return w, f                                           // after the call: w holds the hooks it ran
}

// awaitInstance waits for the changed objects to be healthy, when the instance
// waits.
func (in *revisionInput) awaitInstance(ctx context.Context, c client.Client, r *instanceReconcile, applied []*unstructured.Unstructured) *outcome.Failure {
	if !waitEnabled(r.mi) {
		conditions.Delete(r.live, cairnv1.HealthyCondition) // not checked
		return nil
	}
	if r.release != nil {
		r.release() // a wait holds no apply slot, so it never delays another instance
	}
	return in.waitInstance(ctx, c, r, applied)
}

// pendingInventory is recorded before anything is written: the last inventory plus
// the desired one's new objects with no hash, so a crash never forgets an object
// cairn may have created and never takes an unapplied object for applied.
func pendingInventory(last, desired apply.Inventory) apply.Inventory {
	out := last.Union(apply.Inventory{})
	for id, e := range desired {
		if _, ok := out[id]; !ok {
			out[id] = cairnv1.InventoryEntry{ID: id, Version: e.Version}
		}
	}
	return out
}

// failedInventory is recorded after a failed attempt: the pending inventory with the
// objects the API server accepted marked as applied, or the last inventory itself
// when the apply left nothing written (see apply.Report.Untouched).
func (r *instanceReconcile) failedInventory() apply.Inventory {
	if r.wrote.report.Untouched {
		return r.oldInv.Union(apply.Inventory{})
	}
	out := pendingInventory(r.oldInv, r.wrote.desired)
	for id := range r.wrote.report.Applied {
		out[id] = r.wrote.desired[id]
	}
	return out
}

// pruneInstance deletes the stale objects when the guards allow it; when they refuse,
// the stale objects stay in the inventory so a later commit can prune them.
func (in *revisionInput) pruneInstance(ctx context.Context, m *ssa.ResourceManager, r *instanceReconcile) (*ssa.ChangeSet, *outcome.Failure) {
	if err := in.pruneRefusal(r.instanceVerdicts); err != nil {
		return nil, outcome.Classify(cairnv1.ReasonPruneGuard, err)
	}
	if r.prune == nil || len(r.prune.Stale) == 0 {
		return nil, nil
	}
	in.step(r.key(), "prune %s: %d objects", r.key(), len(r.prune.Stale))
	cs, err := apply.DeleteStale(ctx, m, r.prune.Stale, r.prune.Key, r.prune.UID, in.inlineWait(in.timeout(r.mi)))
	if err != nil {
		return cs, outcome.Classify(cairnv1.ReasonPruneFailed, err)
	}
	return cs, nil
}

func (in *revisionInput) serviceAccount(mi *cairnv1.ModuleInstance) string {
	return placement.ServiceAccount(in.platform, in.set.Tenant(mi.Namespace, mi.Name), mi)
}

// applyBaseline is the inventory whose hashes spare unchanged objects their apply:
// the last one, or none when the instance now applies as another identity, so that
// every object is applied again and the API server checks its RBAC again.
func (in *revisionInput) applyBaseline(r *instanceReconcile) apply.Inventory {
	if r.forced {
		return apply.Inventory{}
	}
	if r.live == nil || r.live.Status.LastAppliedRevision == "" || r.live.Status.ServiceAccount == in.serviceAccount(r.mi) {
		return r.oldInv
	}
	out := make(apply.Inventory, len(r.oldInv))
	for id, e := range r.oldInv {
		e.Hash = "-" // applied (a Job that ran stays as it is), but not as this identity
		out[id] = e
	}
	return out
}

// removalIdentity is what a removed instance deletes as: the identity it last
// applied as, or, when it never applied, the one its last declaration gives.
func (in *revisionInput) removalIdentity(live *cairnv1.ModuleInstance) string {
	if live.Status.LastAppliedRevision != "" {
		return live.Status.ServiceAccount
	}
	return in.serviceAccount(live)
}

func waitEnabled(mi *cairnv1.ModuleInstance) bool {
	return mi.Spec.Wait == nil || *mi.Spec.Wait
}

// persistInventory records inv before objects are created or deleted, so that a
// crash in the middle never forgets an object cairn created. It returns the
// inventory as recorded, nil when inv adds nothing to the last one.
func (in *revisionInput) persistInventory(ctx context.Context, r *instanceReconcile, inv apply.Inventory) (*cairnv1.Inventory, error) {
	if len(inv.Minus(r.oldInv)) == 0 {
		return nil, nil
	}
	before := r.live.DeepCopy()
	if err := in.e.inventories().Store(ctx, r.live, inv, valuesfrom.Masker(r.render.masks)); err != nil {
		return nil, err
	}
	if err := patchStatus(ctx, in.e.cluster.client, r.live, before); err != nil {
		return nil, err
	}
	return r.live.Status.Inventory.DeepCopy(), nil
}

// record writes the outcome to the instance's status: on success the new inventory
// and digests; on failure only the attempt (the last good state stays).
func (s *RevisionState) record(ctx context.Context, r *instanceReconcile, before *cairnv1.ModuleInstance) {
	if r.failure != nil {
		r.interrupt(ctx)
	}
	r.failure = valuesfrom.MaskFailure(r.failure, r.render.masks)
	ctx, cancel := apply.Finishing(ctx) // an interrupted sync still records what it did
	defer cancel()
	mi := r.live
	if r.wrote.persisted != nil { // the patch goes from the inventory recorded already
		before.Status.Inventory = r.wrote.persisted
	}
	switch {
	case r.failure != nil && r.wrote.report.Applied != nil:
		if err := s.e.inventories().Store(ctx, mi, r.failedInventory(), valuesfrom.Masker(r.render.masks)); err != nil {
			s.e.logger(ctx).Error(err, "failed to record the inventory", "instance", r.key(), "revision", s.rev.SHA)
		}
	case r.failure == nil:
		if err := s.storeOutcome(ctx, r, mi); err != nil {
			r.failure = outcome.NewTransient(cairnv1.ReasonApplyFailed, err)
		}
	}
	status.Record(mi, s.attempt(ctx, r))
	rolledBack := r.rollback != nil && r.failure == nil
	if req := status.HoldRequested(mi); rolledBack && req != nil {
		status.Hold(mi, req, r.inputDigest, s.now) // held where it was put back
	}
	r.created = len(before.Status.History) == 0 && len(mi.Status.History) > 0
	if err := s.patchStatusRetrying(ctx, mi, before); err != nil {
		s.e.logger(ctx).Error(err, "failed to record status", "instance", r.key(), "revision", s.rev.SHA)
		r.setFailure(outcome.NewTransient(cairnv1.ReasonApplyFailed, err))
	}
	s.dropLeftInventory(ctx, r)
	if rolledBack && mi.Status.Held != nil {
		s.e.emitHold(mi, cairnv1.ReasonRolledBack, status.HeldMessage(mi.Status.Held))
	}
	s.transition(before, mi)
	s.step(r.key(), "%s %s", r.key(), r.view().outcome())
	s.logOutcome(ctx, r.view())
	s.e.opts.Reporter.InstanceFinished(s.rev.SHA, keyOf(r.mi), r.result())
}

// attempt is what r's reconcile did, as its status records it (status.Record).
func (s *RevisionState) attempt(ctx context.Context, r *instanceReconcile) status.Attempt {
	a := status.Attempt{Revision: s.rev.SHA, Now: s.now, Forced: r.forced, Failure: r.failure,
		Keep: s.platform.Spec.Render.Publish.KeepOrDefault()}
	if !r.started.IsZero() {
		a.Took = time.Since(r.started)
	}
	if r.affected {
		a.Input, a.Artifacts = r.inputDigest, r.render.artifacts
	}
	if r.wrote.applied {
		a.Render = &status.Render{Digest: r.rendered.Digest, Objects: int32(len(r.objects)), Published: r.published}
		if r.rollback != nil {
			a.Render.Revision = r.rollback.Revision // the render of that revision, applied again
		}
	}
	if r.failure == nil {
		a.Applied = status.Applied{
			SourceDigest: s.sourceDigest(r), ValuesDigest: digestJSON(r.live.Spec.Values), RenderDigest: r.rendered.Digest,
			CapabilitiesDigest: s.capabilitiesDigest(ctx, r.mi), ServiceAccount: s.serviceAccount(r.mi),
			Published: r.published, Reason: r.view().readyReason(), Message: r.view().readyMessage(),
		}
		a.Applied.Provides, a.Applied.Requires = s.recordedContracts(r.key(), r.instanceVerdicts)
	}
	return a
}

// storeOutcome records the new inventory of a successful sync, and a chart
// instance's hook record.
func (in *revisionInput) storeOutcome(ctx context.Context, r *instanceReconcile, mi *cairnv1.ModuleInstance) error {
	if err := in.e.inventories().Store(ctx, mi, r.wrote.desired, valuesfrom.Masker(r.render.masks)); err != nil {
		return err
	}
	return in.recordHooks(ctx, r, mi)
}

func (in *revisionInput) sourceDigest(r *instanceReconcile) string {
	if r.sourceDigest != "" {
		return r.sourceDigest
	}
	return r.rendered.ModuleDigest
}

// ensureNamespace creates the namespace an instance CR lives in when it is missing, so
// a repository can bootstrap its tenants. The namespace is labelled as cairn's but is
// in no inventory: it is never pruned.
func (s *RevisionState) ensureNamespace(ctx context.Context, name string) error {
	if s.knownNamespace(name) {
		return nil
	}
	// Created without reading it first (one request where most are new, issue 24):
	// AlreadyExists says it is there. Where cairn may not create namespaces, a read
	// says whether it needs to.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}}}
	err := s.e.cluster.client.Create(ctx, ns)
	if apierrors.IsForbidden(err) {
		if gerr := s.e.cluster.client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); gerr == nil {
			s.rememberNamespace(name)
			return nil
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create namespace %s: %w", name, err)
	}
	s.rememberNamespace(name)
	if err == nil {
		s.mu.Lock()
		s.createdNamespaces[name] = true
		s.mu.Unlock()
	}
	return nil
}

// createdNamespace reports whether this sync created namespace name: nothing in it can
// predate the sync.
func (v *clusterView) createdNamespace(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.createdNamespaces[name]
}

func (v *clusterView) knownNamespace(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.namespaces[name]
}

func (v *clusterView) rememberNamespace(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.namespaces[name] = true
}

// patchStatusRetrying writes a status with a short bounded backoff, so an outcome is
// not lost to a brief API server outage (up to about 15 s, never past ctx; a fresh
// context is used when ctx is already done, since the outcome matters most then).
func (in *revisionInput) patchStatusRetrying(ctx context.Context, obj, before client.Object) error {
	if ctx.Err() != nil && !shard.Revoked(ctx) { // a shard lost: nothing more is written
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
	}
	backoff := wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 7, Cap: 4 * time.Second}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = patchStatus(ctx, in.e.cluster.client, obj, before)
		return last == nil || !outcome.IsTransient(last), nil
	})
	if last != nil {
		return last
	}
	return err
}

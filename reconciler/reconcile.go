package reconciler

import (
	"context"
	"fmt"
	"sync"
	"time"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/internal/fairslots"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/render/declarations"
)

// A sync is two reconciles that the CLI and the controller share: the revision step
// (PrepareRevision: load the declarations, mirror the Platform and Registries, decide
// the affected and removed instances and write their input into their CRs; it
// renders nothing) and the instance reconcile (ReconcileInstance: render, apply,
// prune, wait, record). The first instance reconcile starts every affected
// instance's render; each instance applies once its own render is done, or, when a
// verdict of its apply needs every render, once the revision's renders are all done
// (the render barrier, barrier.go).
// Finish removes the instances that left Git and records the revision. Engine.Sync
// runs the three in-process, the instances in dependsOn order.

// RevisionState is the state of one revision, which the revision step, the
// instance reconciles and the finish share (docs/architecture.md, "The state of a
// revision"): its plan (runs, byKey: which instances the revision affects, each
// with its entry, an instanceState) and three values, each with its own rule of
// access: what the revision gives every phase (revisionInput, never written once
// the plan starts), what it learns of the cluster (clusterView, filled lazily under
// its locks) and what it decides over all of its renders (verdicts, at the render
// barrier); then what its instance reconciles meet on (apply and render slots, the
// barrier, the outcomes). Each instance's reconcile works on a value of its own
// (instanceReconcile). It is safe for concurrent ReconcileInstance calls.
type RevisionState struct {
	revisionInput
	clusterView
	verdicts

	// runs and byKey are the plan: plan fills them once, before any instance
	// reconcile starts, and nothing changes them after.
	runs  []*instanceState          // in dependsOn order
	byKey map[string]*instanceState // namespace/name

	// unusable is the result of a revision whose declarations could not be used at
	// all: nothing is reconciled, Finish returns it.
	unusable *SyncResult
	slots    chan struct{} // apply slots: at most Options.ApplyConcurrency instances apply at once
	start    sync.Once     // starts the renders of the revision (see startRenders)
	// renderSlots are the render slots, shared fairly between tenants; inflight
	// counts the renders under way and the goroutines that start them.
	renderSlots *fairslots.Slots
	inflight    sync.WaitGroup
	barrier     sync.Once // the verdicts over every render (see passBarrier)

	// replica: built by PrepareInstances (replica.go): its reconciles take only the
	// instances whose CR holds this revision's input, and read the others' outcomes
	// from their CRs.
	replica bool

	outcomesMu sync.Mutex                  // guards outcomes and done
	outcomes   map[string]*InstanceOutcome // by namespace/name, once reconciled
	done       map[string]chan struct{}    // closed once the instance has an outcome
}

// InstanceOutcome is what one instance reconcile did: the result, whether the
// instances that depend on it may go ahead, and when it is due again at this
// revision (zero: only at the next revision or on a change).
type InstanceOutcome struct {
	Result InstanceResult
	// RequeueAfter is how long until the instance is due again: its retry
	// (status.nextRetryAt) after a failure, its health recheck when Progressing, or a
	// short wait when a dependency has not been reconciled yet.
	RequeueAfter time.Duration
	// SatisfiesDependents says whether its dependents may be applied now.
	SatisfiesDependents bool
	// Pending says nothing was done: a dependency has no outcome yet at this revision;
	// WaitsOn names those dependencies.
	Pending bool
	WaitsOn []string
	// Stale says nothing was done: the instance's CR holds the input of another
	// revision than the state's (a replica's, see PrepareInstances).
	Stale bool
}

// pendingRequeue is how soon a reconcile that found a dependency not yet reconciled
// asks again.
const pendingRequeue = time.Second

// PrepareRevision runs the revision step for rev. An unusable revision (a path that
// does not exist, declarations that do not load) is recorded on the Platform and
// yields a state with no instance to reconcile, whose Finish returns the failure.
func (e *Engine) PrepareRevision(ctx context.Context, rev Revision) (*RevisionState, error) {
	e.opts.Metrics.ObserveFetch(rev.Fetch)
	root, err := rev.Tree.Sub(e.opts.Path)
	if err != nil {
		return nil, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, fmt.Errorf("failed to open path %s: %w", e.opts.Path, err))
	}
	set, loadErr := e.load(ctx, root)
	if loadErr != nil {
		res, err := e.failRevision(ctx, rev, outcome.NewStalled(cairnv1.ReasonInvalidDeclaration, loadErr))
		return &RevisionState{unusable: res}, err
	}
	s, err := e.newRevisionFrom(ctx, rev, root, set, false, e.revisionStepLive())
	if err != nil {
		return nil, err
	}
	s.prepare(ctx)
	return s.forReconciles(), nil
}

// forReconciles readies s, planned, for its instance reconciles: the claim table,
// each affected instance's meeting points, the apply and render slots and the
// outcomes (a plan has none of these: it renders and decides in one goroutine).
func (s *RevisionState) forReconciles() *RevisionState {
	s.claims = map[string]*instanceState{}
	for _, r := range s.runs {
		if r.affected {
			r.placed, r.settled = make(chan struct{}), make(chan struct{})
		}
	}
	s.slots = make(chan struct{}, max(s.e.opts.ApplyConcurrency, 1))
	s.renderSlots = fairslots.New(max(s.e.opts.Concurrency, 1))
	s.outcomes, s.done = map[string]*InstanceOutcome{}, map[string]chan struct{}{}
	return s
}

// prepare is the revision step: it plans (which instances the revision affects,
// which left Git) and writes the affected instances' input into their CRs. It
// renders nothing: the renders are the instance reconciles' (see render).
func (s *RevisionState) prepare(ctx context.Context) {
	s.discoverForCharts(ctx) // once per revision: what the charts see of the cluster
	s.plan()
	if !s.readOnly {
		s.e.opts.Reporter.SyncStarted(s.rev.SHA, s.touched())
		s.markInvalid(ctx)
		s.writeInputs(ctx)
	}
}

// render renders the affected instances and decides, over all of their renders,
// what needs the whole set: the kinds' scopes, the provider contracts, the prune
// verdicts (moves, the per-tenant caps) and the objects two instances render. A
// plan runs it right after prepare; a sync renders each instance on its own
// (RevisionState.startRenders) and decides over all of them only at the render
// barrier.
func (s *RevisionState) render(ctx context.Context) {
	s.renderAll(ctx)
	s.inferContracts(nil)
	if !interrupted(ctx) {
		s.checkPrunes(ctx)
		s.provideWithdrawn()
		s.claimShared()
	}
}

// Revision is the SHA the state was prepared for.
func (s *RevisionState) Revision() string {
	if s.unusable != nil {
		return s.unusable.Revision
	}
	return s.rev.SHA
}

// Instances are the keys (namespace/name) of the declared instances, in dependsOn
// order; an unusable revision has none.
func (s *RevisionState) Instances() []string {
	if s.unusable != nil {
		return nil
	}
	keys := make([]string, 0, len(s.runs))
	for _, r := range s.runs {
		keys = append(keys, r.key())
	}
	return keys
}

// ReconcileInstance reconciles the instance key at this revision and returns what it
// did. An instance the revision does not affect is left as it is (a suspended one
// records that it is). A dependency that is not reconciled yet makes it Pending, with
// nothing done; a dependency that is not ready makes it Waiting. Each instance is
// reconciled once per revision: a second call returns the first outcome (retries
// come with the next revision step, once status.nextRetryAt is due).
func (s *RevisionState) ReconcileInstance(ctx context.Context, key string) InstanceOutcome {
	if out := s.outcome(key); out != nil {
		return *out
	}
	r := s.byKey[key]
	if r == nil {
		ns, name := splitKey(key)
		return InstanceOutcome{Result: InstanceResult{Namespace: ns, Name: name, Action: outcome.ActionSkipped,
			Reason: "NotDeclared", Message: "not declared at " + gitsource.ShortSHA(s.Revision())}}
	}
	if !r.affected {
		if r.suspended() && !s.replica { // the revision step's state records it
			s.recordSuspended(ctx, r)
		}
		return s.keep(r)
	}
	if !s.heldInput(r) {
		return InstanceOutcome{Result: r.result(), Stale: true}
	}
	s.renderRun(ctx, r)
	if !r.fast {
		s.passBarrier(ctx)
	}
	deps := s.dependencies(ctx, r)
	f, pending := dependencyVerdict(deps)
	if pending {
		return InstanceOutcome{Result: r.result(), RequeueAfter: pendingRequeue, Pending: true, WaitsOn: pendingOn(deps)}
	}
	r.setFailure(f)
	s.apply(ctx, r)
	return s.keep(r)
}

// startRenders starts, once, the render of every affected instance not rendered
// yet, in the background: each tenant's instances in order, in turn with the other
// tenants' (fairslots), each settling (barrier.go) as soon as its render is done. An
// interrupted sync starts no more.
func (s *RevisionState) startRenders(ctx context.Context) {
	s.start.Do(func() {
		wait := context.WithoutCancel(ctx) // every instance gets its turn; its render sees ctx
		for tenant, runs := range s.affectedByTenant() {
			s.inflight.Add(1)
			go func() {
				defer s.inflight.Done()
				for _, r := range runs {
					if interrupted(ctx) {
						return
					}
					if isClosed(r.settled) {
						continue // rendered by its own reconcile
					}
					_ = s.renderSlots.Acquire(wait, tenant)
					s.inflight.Add(1)
					go func() {
						defer s.inflight.Done()
						s.renderHeld(ctx, r, tenant)
					}()
				}
			}()
		}
	})
}

// renderRun renders and settles r once, in a render slot of its tenant, and returns
// once it has settled: an instance reconcile renders its own instance, whether or
// not the others' renders were started.
func (s *RevisionState) renderRun(ctx context.Context, r *instanceState) {
	if isClosed(r.settled) {
		return
	}
	tenant := tenantOf(s.set, r.mi)
	_ = s.renderSlots.Acquire(context.WithoutCancel(ctx), tenant)
	s.renderHeld(ctx, r, tenant)
}

// renderHeld renders and settles r unless that is done or under way, holding a render
// slot of tenant, which it gives back as soon as the render is done.
func (s *RevisionState) renderHeld(ctx context.Context, r *instanceState, tenant string) {
	ran := false
	r.renderOnce.Do(func() {
		ran = true
		s.renderInstance(ctx, r)
		s.renderSlots.Release(tenant)
		s.settle(ctx, r)
		if r.render.res == nil {
			close(r.placed)
		}
		close(r.settled)
	})
	if !ran {
		s.renderSlots.Release(tenant)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// passBarrier waits until every affected instance has rendered and decides, once,
// what needs all of their renders (see decideTogether).
func (s *RevisionState) passBarrier(ctx context.Context) {
	s.barrier.Do(func() {
		s.startRenders(ctx)
		for _, r := range s.runs {
			if r.affected {
				s.renderRun(ctx, r) // at once when rendered; else renders it (an interrupted sync's)
			}
		}
		s.decideTogether(ctx)
	})
}

// apply takes an apply slot (given back early by a health wait, see applyInstance)
// and syncs r.
func (s *RevisionState) apply(ctx context.Context, r *instanceState) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		s.reportInterrupted(ctx, r)
		return
	}
	release := sync.OnceFunc(func() { <-s.slots })
	defer release()
	if interrupted(ctx) {
		s.reportInterrupted(ctx, r)
		return
	}
	s.syncInstance(ctx, r, release)
}

func (s *RevisionState) outcome(key string) *InstanceOutcome {
	s.outcomesMu.Lock()
	defer s.outcomesMu.Unlock()
	return s.outcomes[key]
}

// keep records r's outcome and returns it.
func (s *RevisionState) keep(r *instanceState) InstanceOutcome {
	out := outcomeOf(r)
	s.outcomesMu.Lock()
	defer s.outcomesMu.Unlock()
	if had := s.outcomes[r.key()]; had != nil {
		return *had
	}
	s.outcomes[r.key()] = &out
	close(s.doneLocked(r.key()))
	return out
}

// doneLocked is the channel closed once key has an outcome; s.outcomesMu is held.
func (s *RevisionState) doneLocked(key string) chan struct{} {
	ch := s.done[key]
	if ch == nil {
		ch = make(chan struct{})
		s.done[key] = ch
	}
	return ch
}

// awaitOutcomes waits until each of keys has an outcome at this revision.
func (s *RevisionState) awaitOutcomes(ctx context.Context, keys []string) {
	for _, k := range keys {
		s.outcomesMu.Lock()
		done := s.doneLocked(k)
		s.outcomesMu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// outcomeOf is r's outcome as it stands: requeued when its result says when it is
// retried (a failure, a deferred retry, a health recheck).
func outcomeOf(r *instanceState) InstanceOutcome {
	res := r.result()
	return InstanceOutcome{Result: res, SatisfiesDependents: r.satisfiesDependents(), RequeueAfter: requeueAt(res.NextRetryAt, time.Now())}
}

// requeueAt is how long from now until at (nil: never; past: at once).
func requeueAt(at *time.Time, now time.Time) time.Duration {
	if at == nil {
		return 0
	}
	return max(at.Sub(now), time.Nanosecond)
}

// dependencyState is what an instance reconcile knows of one of its dependencies.
type dependencyState struct {
	key string
	// declared: the dependency is a valid instance at this revision.
	declared bool
	// outcome is its outcome at this revision; nil when it has none yet. An
	// instance the revision does not affect has its outcome at once.
	outcome *InstanceOutcome
	// kinds, for a provider the instance requires (a contract, not a dependsOn),
	// are the kinds it uses that the provider has not served yet.
	kinds []string
}

func (s *RevisionState) dependencies(ctx context.Context, r *instanceState) []dependencyState {
	var out []dependencyState
	for _, key := range declarations.DependencyIDs(r.mi) {
		out = append(out, s.dependency(ctx, key, nil))
	}
	for _, p := range s.pendingProviders(r) {
		out = append(out, s.dependency(ctx, p.Instance, p.Kinds))
	}
	return out
}

// dependency is the state of the instance key at this revision.
func (s *RevisionState) dependency(ctx context.Context, key string, kinds []string) dependencyState {
	ds := dependencyState{key: key, kinds: kinds}
	if d := s.byKey[key]; d != nil {
		ds.declared = true
		ds.outcome = s.outcome(key)
		switch {
		case ds.outcome == nil && !d.affected && !d.suspended():
			out := outcomeOf(d)
			ds.outcome = &out
		case ds.outcome == nil && s.replica:
			ds.outcome = s.attempted(ctx, d) // reconciled by another replica, perhaps
		}
	}
	return ds
}

// pendingOn are the dependencies that have no outcome yet at this revision.
func pendingOn(deps []dependencyState) []string {
	var out []string
	for _, d := range deps {
		if d.declared && d.outcome == nil {
			out = append(out, d.key)
		}
	}
	return out
}

// dependencyVerdict decides whether an instance with these dependencies may be
// applied: pending when one has no outcome yet at this revision, else the first
// reason it must wait (nil: it may go ahead).
func dependencyVerdict(deps []dependencyState) (*outcome.Failure, bool) {
	var f *outcome.Failure
	for _, d := range deps {
		if d.kinds != nil {
			f = firstFailure(f, providerVerdict(d))
			if d.declared && d.outcome == nil {
				return nil, true
			}
			continue
		}
		switch {
		case !d.declared:
			f = firstFailure(f, outcome.NewWaiting(cairnv1.ReasonDependencyNotReady, fmt.Errorf("dependency %s is not a valid instance", d.key)))
		case d.outcome == nil:
			return nil, true
		case d.outcome.Result.Action == outcome.ActionProgressing:
			f = firstFailure(f, outcome.NewWaiting(cairnv1.ReasonDependencyNotReady, fmt.Errorf("dependency %s is progressing: applied, not yet healthy", d.key)))
		case !d.outcome.SatisfiesDependents:
			f = firstFailure(f, outcome.NewWaiting(cairnv1.ReasonDependencyNotReady, fmt.Errorf("dependency %s is not ready", d.key)))
		}
	}
	return f, false
}

func firstFailure(have, next *outcome.Failure) *outcome.Failure {
	if have != nil {
		return have
	}
	return next
}

// ReconcileAll reconciles every instance of the revision in-process, each once the
// outcomes of its dependencies are in (its dependsOn, and the providers its render
// requires), at most Options.ApplyConcurrency applying at once. An interrupted run
// records the instances in flight and starts no other.
func (s *RevisionState) ReconcileAll(ctx context.Context) {
	if s.unusable != nil {
		return
	}
	s.startRenders(ctx)
	waitsOn := func(key string) []string { return s.unreconciledDependsOn(ctx, key) }
	inDependencyOrder(s.Instances(), waitsOn, func(key string) {
		for {
			out := s.ReconcileInstance(ctx, key)
			if !out.Pending || interrupted(ctx) {
				return
			}
			s.awaitOutcomes(ctx, out.WaitsOn) // providers found by its render
		}
	})
}

// unreconciledDependsOn are the instances key declares it depends on that have no
// outcome yet.
func (s *RevisionState) unreconciledDependsOn(ctx context.Context, key string) []string {
	var out []string
	for _, dep := range declarations.DependencyIDs(s.byKey[key].mi) {
		if d := s.dependency(ctx, dep, nil); d.declared && d.outcome == nil {
			out = append(out, d.key)
		}
	}
	return out
}

// inDependencyOrder calls run for every key, concurrently, each once run has returned
// for every key it waits on (read before any run starts). keys must hold no cycle
// (declarations.Load refuses them); a key waited on that is not in keys is ignored.
func inDependencyOrder(keys []string, waitsOn func(string) []string, run func(string)) {
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
	}
	pending := map[string]int{}         // key -> keys it waits on that have not run
	dependents := map[string][]string{} // key -> the keys waiting on it
	for _, k := range keys {
		for _, d := range waitsOn(k) {
			if known[d] {
				pending[k]++
				dependents[d] = append(dependents[d], k)
			}
		}
	}
	done := make(chan string)
	start := func(key string) {
		go func() { run(key); done <- key }()
	}
	for _, k := range keys {
		if pending[k] == 0 {
			start(k)
		}
	}
	for range keys {
		key := <-done
		for _, d := range dependents[key] {
			if pending[d]--; pending[d] == 0 {
				start(d)
			}
		}
	}
}

// Finish ends the revision: unless it was interrupted, it rotates the due generated
// Secrets of the instances it did not affect and removes the instances that left
// Git; then it records the revision on the Platform and returns the result.
func (s *RevisionState) Finish(ctx context.Context) (*SyncResult, error) {
	if s.unusable != nil {
		return s.unusable, nil
	}
	if s.replica {
		return nil, fmt.Errorf("a replica's state of %s has no revision to finish: the revision step's state finishes it", gitsource.ShortSHA(s.Revision()))
	}
	if interrupted(ctx) {
		s.start.Do(func() {}) // no render starts after this; those started are waited for
		s.inflight.Wait()
	} else {
		if !s.e.opts.Sharded || len(s.removed) > 0 {
			s.passBarrier(ctx) // the removals' prune verdicts are decided with the renders
		} else {
			s.inferContracts(nil) // the graph's provider edges, from what the CRs record
		}
		s.rotateUnaffected(ctx)
		s.removeInstances(ctx)
		if !s.readOnly {
			s.e.sweepConfigs(ctx, s.e.cluster.client, s.e.namespace()) // failed render tasks' config Secrets, past their TTL
		}
	}
	return s.finish(ctx)
}

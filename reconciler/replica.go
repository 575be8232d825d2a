package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/reconciler/status"
)

// A replica's view of a revision (docs/architecture.md, step 7): a replica that did
// not run the revision step reconciles instances from their CRs. It reads the
// revision named by an instance's cairn.dev/input-revision from its own copy of the
// repository and builds the same state the revision step built, writing nothing of
// the revision step's (no mirror, no input, no Platform status); an instance is
// reconciled only when the input digest computed there is the one its CR holds. Its
// dependencies reconciled by another replica are read from their CRs. The verdicts
// that need every render (the render barrier) are decided in the replica's own
// process over renders of its own: every replica decides them from the same
// revision and the same CRs, so they agree, and a prune is only ever admitted over
// a count no larger than the one that admitted it elsewhere.

// PrepareInstances builds the state of rev for a replica's instance reconciles: the
// revision step's plan, read-only, over the CRs as the revision step wrote them. An
// unusable revision is an error: the revision step records it, not a replica.
func (e *Engine) PrepareInstances(ctx context.Context, rev Revision) (*RevisionState, error) {
	root, err := rev.Tree.Sub(e.opts.Path)
	if err != nil {
		return nil, fmt.Errorf("failed to open path %s: %w", e.opts.Path, err)
	}
	set, err := e.load(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", gitsource.ShortSHA(rev.SHA), err)
	}
	// Read-only: nothing of the revision step is written. The CRs come from the
	// controller's informer cache when there is one (a LIST of every CR from the API
	// server took most of the time a replica spent here): a CR the cache has not seen
	// yet at this input is taken later (Take) or gets a state of its own.
	s, err := e.newRevisionFrom(ctx, rev, root, set, true, e.instances())
	if err != nil {
		return nil, err
	}
	s.readOnly = false // its instance reconciles write as any sync's do
	s.discoverForCharts(ctx)
	s.plan()
	for _, r := range s.runs {
		if r.affected && r.was != nil {
			s.holdInput(r, r.was)
		}
	}
	s.forReconciles().replica = true
	return s, nil
}

// heldInput tells whether r's CR holds the input of this state's revision; a
// replica reconciles no other (its CR is at another revision: the state of that one
// reconciles it).
func (s *RevisionState) heldInput(r *instanceState) bool {
	return !s.replica || s.mirroredCR(r) != nil
}

// Take takes mi, a CR the revision step created after this state was built, into
// the state, and tells whether it did: when the state found no CR of that instance
// (it planned it as new, as the revision step did) and mi holds the state's input
// for it and no status yet, building the state again would plan it the same way.
// On a cold fleet the revision step writes the CRs while the first reconciles run,
// and each state built too early would otherwise be built again, a LIST of every
// CR each time, on the path of the last instances.
func (s *RevisionState) Take(mi *cairnv1.ModuleInstance) bool {
	r := s.byKey[mi.Namespace+"/"+mi.Name]
	if !s.replica || r == nil || !r.affected || r.was != nil ||
		mi.Annotations[inputRevisionAnnotation] != s.rev.SHA || !neverAttempted(mi) {
		return false
	}
	return s.holdInput(r, mi.DeepCopy())
}

// holdInput makes cr, when it holds this revision's input for r, the CR r's
// reconcile works on, and tells whether it did. A CR no reconcile has attempted
// (the revision step created it, or wrote it and none has attempted it since) is
// planned as a new instance, as the revision step planned it, so that the replica
// finds what a deleted CR left (its kept inventory, its labelled objects) as the
// revision step's own process would.
func (s *RevisionState) holdInput(r *instanceState, cr *cairnv1.ModuleInstance) bool {
	if cr.Annotations[inputDigestAnnotation] != r.inputDigest {
		return false
	}
	s.mu.Lock() // guards r.mirrored (see mirroredCR)
	defer s.mu.Unlock()
	if r.mirrored != nil {
		return true // held already (another reconcile of it took it first)
	}
	r.mirrored = cr
	if r.was != nil && neverAttempted(cr) { // found when the state was built (Take's has none)
		p := r.instancePlan // its digests stay: cr holds them
		p.was = nil
		p.affected, p.why = s.isAffected(&p)
		r.instancePlan = p
	}
	return true
}

// neverAttempted tells whether no reconcile has attempted mi yet: it has no status.
func neverAttempted(mi *cairnv1.ModuleInstance) bool {
	return equality.Semantic.DeepEqual(mi.Status, cairnv1.ModuleInstanceStatus{})
}

// attempted is the outcome of d, which this replica has not reconciled, as its CR
// records it once it has attempted its input at this revision (nil: not yet).
func (s *RevisionState) attempted(ctx context.Context, d *instanceState) *InstanceOutcome {
	var mi cairnv1.ModuleInstance
	if err := s.e.instances().Get(ctx, client.ObjectKey{Namespace: d.mi.Namespace, Name: d.mi.Name}, &mi); err != nil {
		return nil // not readable now: the reconcile asks again
	}
	return attemptedIn(&mi, d, s.mirroredCR(d))
}

// attemptedIn is the outcome mi, the CR of d, records once d has attempted its input
// at this revision (nil: not yet). written is the CR as the revision step wrote it,
// when this process knows it: an attempt of it, or of a later generation, counts,
// so that an edit of the CR after the attempt (a kubectl edit the next sync reverts)
// does not hide it; without it the CR's own generation must have been attempted.
func attemptedIn(mi *cairnv1.ModuleInstance, d *instanceState, written *cairnv1.ModuleInstance) *InstanceOutcome {
	want := mi.Generation
	if written != nil {
		want = written.Generation
	}
	if mi.Status.LastAttemptedInput != d.inputDigest || mi.Status.ObservedGeneration < want {
		return nil
	}
	res := InstanceResult{Namespace: mi.Namespace, Name: mi.Name, Ready: status.IsReady(mi), Action: outcome.ActionFailed}
	if c := conditions.Get(mi, "Ready"); c != nil {
		res.Reason, res.Message = c.Reason, c.Message
	}
	switch {
	case res.Ready:
		res.Action = outcome.ActionUnchanged
	case conditions.IsUnknown(mi, "Ready") || res.Reason == cairnv1.ReasonProgressing:
		res.Action = outcome.ActionProgressing
	}
	return &InstanceOutcome{Result: res, SatisfiesDependents: res.Ready}
}

// attemptPoll is how often a sharded sync reads the CRs of the instances it waits for.
const attemptPoll = 500 * time.Millisecond

// awaitAttempts waits, in a sharded sync, until every instance the revision affects
// has attempted its input (its CR records it), each at most its timeout and the
// health wait beyond the start of the wait, and takes their outcomes from their CRs,
// reporting each (commit statuses, metrics) as it reads it; the suspended ones it
// records itself, as ReconcileAll does. An instance still not attempted by then is
// reported as not synced yet (its reconcile goes on).
func (s *RevisionState) awaitAttempts(ctx context.Context) {
	if s.unusable != nil {
		return
	}
	var wait []*instanceState
	deadline := time.Duration(0)
	for _, r := range s.runs {
		switch {
		case r.affected:
			wait = append(wait, r)
			deadline = max(deadline, s.timeout(r.mi))
		case r.suspended():
			s.ReconcileInstance(ctx, r.key())
		}
	}
	until := time.Now().Add(deadline + s.e.opts.HealthWait + time.Minute)
	for len(wait) > 0 && time.Now().Before(until) {
		wait = s.takeAttempts(ctx, wait)
		if len(wait) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(attemptPoll):
		}
	}
	for _, r := range wait {
		r.remote = &InstanceOutcome{Result: InstanceResult{Namespace: r.mi.Namespace, Name: r.mi.Name,
			Action: outcome.ActionProgressing, Reason: cairnv1.ReasonProgressing,
			Message: "its reconcile has not attempted this revision's input yet"}}
		s.e.outsideReporter().InstanceFinished(s.rev.SHA, keyOf(r.mi), r.remote.Result)
	}
}

// takeAttempts reads the CRs once (one LIST a poll, not a GET an instance), takes
// and reports the outcome of each instance of wait that has attempted its input,
// and returns the others (all of them when the CRs could not be read).
func (s *RevisionState) takeAttempts(ctx context.Context, wait []*instanceState) []*instanceState {
	var list cairnv1.ModuleInstanceList
	// Read only (attemptedIn copies what it keeps): from the informer cache, no copy
	// of every CR twice a second while the sync waits, which at 10,000 instances was
	// tens of MB of garbage a poll.
	if err := s.e.instances().List(ctx, &list, client.MatchingLabels{cairnv1.ManagedByLabel: cairnv1.ManagedByValue},
		client.UnsafeDisableDeepCopy); err != nil {
		return wait
	}
	live := make(map[string]*cairnv1.ModuleInstance, len(list.Items))
	for i := range list.Items {
		live[list.Items[i].Namespace+"/"+list.Items[i].Name] = &list.Items[i]
	}
	var left []*instanceState
	for _, r := range wait {
		out := (*InstanceOutcome)(nil)
		if mi := live[r.key()]; mi != nil {
			out = attemptedIn(mi, r, r.mirrored)
		}
		if out == nil {
			left = append(left, r)
			continue
		}
		r.remote = out
		s.e.outsideReporter().InstanceFinished(s.rev.SHA, keyOf(r.mi), out.Result)
	}
	return left
}

// Due says whether the instance reconcile of mi has work now: its CR holds an input
// it has not attempted, its spec changed, it was resumed, or it failed or is
// progressing and its retry or health recheck is due. Otherwise after is when it will have (0: only on
// a change of its CR).
func Due(mi *cairnv1.ModuleInstance, now time.Time) (due bool, after time.Duration) {
	switch {
	case mi.Spec.Suspend || status.SuspendAnnotated(mi):
		return false, 0
	case mi.Annotations[inputDigestAnnotation] == "":
		return false, 0 // no input written yet
	case mi.Annotations[inputDigestAnnotation] != mi.Status.LastAttemptedInput,
		mi.Generation != mi.Status.ObservedGeneration,
		reconcileRequested(mi),
		status.IsSuspended(mi): // recorded suspended, no longer: resumed (cairn resume)
		return true, 0
	case status.IsReady(mi):
		return false, 0
	}
	if next := retryTime(mi); next != nil && now.Before(*next) {
		return false, next.Sub(now)
	}
	return true, 0
}

// InputRevisionAnnotation names, on a ModuleInstance, the revision whose input the
// revision step wrote into it: the revision its reconcile builds its state from.
const InputRevisionAnnotation = inputRevisionAnnotation

// InputDigestAnnotation holds, on a ModuleInstance, the digest of the input the
// revision step wrote (see inputDigest); status.lastAttemptedInput records the last
// one attempted.
const InputDigestAnnotation = inputDigestAnnotation

// HoldsInput tells whether this state reconciles mi at the input its CR holds now:
// the state planned it at that input (an instance the revision does not declare:
// always), and, when the instance is affected, its CR as the state read it holds
// that input (always, outside a replica). An instance that is not affected is held
// too: its reconcile does nothing. A Registry's refresh writes a new input at the
// same revision (see refreshAnnotation), which a state built before it planned as
// unchanged: reconciled there, the refresh would be kept as "unchanged" and never
// verified, so such a state does not hold it; nor does one built before the
// instance's hold was asked or released, or before it was suspended or resumed in
// the cluster.
func (s *RevisionState) HoldsInput(mi *cairnv1.ModuleInstance) bool {
	r := s.byKey[mi.Namespace+"/"+mi.Name]
	if r == nil {
		return true
	}
	if r.was != nil {
		// A suspension or resumption in the cluster since the state was built (cairn
		// suspend, cairn resume), or a suspension recorded since (by the revision step),
		// changes the plan at the same revision and input: a state that planned the
		// instance suspended, or unchanged, would leave it suspended once resumed.
		if status.SuspendAnnotated(r.was) != status.SuspendAnnotated(mi) || status.IsSuspended(r.was) != status.IsSuspended(mi) {
			return false
		}
		// A hold asked or released since the state was built (cairn hold, cairn
		// release) changes the plan at the same revision and input.
		p := r.instancePlan
		p.was, p.held, p.releaseHold = mi, false, false
		if s.holds(&p) != r.held {
			return false
		}
	}
	return r.inputDigest == mi.Annotations[inputDigestAnnotation] && (!r.affected || s.heldInput(r))
}

// Reconciled tells whether key has an outcome in this state: a second reconcile
// would return it without doing anything, so a retry needs a fresh state.
func (s *RevisionState) Reconciled(key string) bool {
	return s.outcome(key) != nil
}

// ForInstances is an engine for a replica's instance reconciles beside e's revision
// steps: it shares e's cluster, renderer, render cache and verifier, and reports to
// no forge (the revision step's engine reports the revision and its instances when
// it finishes it); it counts each outcome in the metrics, with what the CR does not
// record (the action, the objects).
func (e *Engine) ForInstances() *Engine {
	opts := e.opts
	opts.Reporter = report.Nop{} // the leader reports each outcome as it reads it (awaitAttempts)
	if opts.Metrics != nil {
		opts.Reporter = opts.Metrics
	}
	return &Engine{cluster: e.cluster, renderer: e.renderer, cache: e.cache, verifier: e.verifier, opts: opts,
		outside: report.Nop{}}
}

// instances is where the CRs of other instances are read (Options.Instances).
func (e *Engine) instances() client.Reader {
	if e.opts.Instances != nil {
		return e.opts.Instances
	}
	return e.cluster.client
}

// revisionStepLive is where the revision step reads the live ModuleInstances: in a
// sharded sync, the controller's informer cache (Options.Instances), as the
// replicas do; a LIST of every CR from the API server was most of the revision
// step's time at 1000 instances (0.38 s of 0.7 s). A view a moment behind costs no
// correctness there, with one exception: the revision step writes inputs the way it
// plans them (a CR missing from the view is planned as new and written; a write of
// an input the CR holds already changes nothing), each replica plans its reconcile
// from its own view, and the sync waits for the attempts it reads from the CRs. The
// exception is a CR the view still holds after it was deleted: planned as
// unchanged, it would not be written again, so an instance removed by one commit
// and declared again by the next would stay missing. Edits and deletions by others
// reach the cache before the watch that kicks the sync; the engine's own removals
// do not, so after one the next revision step lists from the API server. The one
// status the revision step writes, an invalid declaration's, is written over the
// CR read afresh (see markInvalid).
// Unsharded, the sync reconciles what it plans in its own process, so it always
// plans from the API server.
func (e *Engine) revisionStepLive() client.Reader {
	if e.opts.Sharded && !e.deletedCRs.Swap(false) {
		return e.instances()
	}
	return e.cluster.client
}

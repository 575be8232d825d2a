package loop

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/shard"
)

// Instances reconciles ModuleInstances on the controller's queue, each from its CR
// (docs/architecture.md, steps 7 and 8): an instance whose CR holds an input it has
// not attempted, or whose retry or health recheck is due, is reconciled in the state
// of the revision its CR names (reconciler.Engine.PrepareInstances), under the
// context of its shard, so that a replica that loses the shard writes nothing more
// for it.
type Instances struct {
	// Engine builds the revisions' states; its options say how instances are applied.
	Engine *reconciler.Engine
	// Source reads a revision by its SHA: the controller's reads from memory one the
	// leader's loop of this process has just read (ReadThrough), else from a cache
	// clone of the reconciles' own (the leader's loop fetches into another).
	Source Source
	// Reader reads the CRs (the manager's cache).
	Reader client.Reader
	// Shards, when set, are the shards this replica may reconcile; nil: every instance.
	Shards *shard.Set
	Log    logr.Logger

	mu     sync.Mutex
	states []*revisionState // the latest last
	// attempted is the input each instance's last reconcile here attempted: the
	// informer cache may not show its status write yet when the next event comes.
	attempted map[string]string
}

// revisionState is one revision's state and the instances reconciled in it.
type revisionState struct {
	sha string
	st  *reconciler.RevisionState
}

// keptStates is how many revisions' states a replica keeps: the instances of one
// revision may still be reconciling when the next arrives.
const keptStates = 2

// staleRequeue is how soon an instance whose CR is at another revision than the
// state is tried again (its CR's change requeues it anyway).
const staleRequeue = time.Second

// Reconcile reconciles the instance req names, if it is due and in a shard held here.
func (in *Instances) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if in.Shards != nil {
		bound, cancel, ok := in.Shards.Bind(ctx, req.Namespace, req.Name)
		defer cancel()
		if !ok {
			return reconcile.Result{}, nil // its shard's holder reconciles it; OnChange requeues it here
		}
		ctx = bound
	}
	var mi cairnv1.ModuleInstance
	if err := in.Reader.Get(ctx, req.NamespacedName, &mi); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	due, after := reconciler.Due(&mi, time.Now())
	if !due {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	key := req.Namespace + "/" + req.Name
	input := mi.Annotations[reconciler.InputDigestAnnotation]
	if input != mi.Status.LastAttemptedInput && in.attemptedHere(key) == input {
		// Attempted here already: the cache has not seen the status it wrote. Planned
		// again from that stale view, its objects would all look new and be applied twice.
		return reconcile.Result{RequeueAfter: staleRequeue}, nil
	}
	st, err := in.state(ctx, mi.Annotations[reconciler.InputRevisionAnnotation], &mi)
	if err != nil {
		return reconcile.Result{}, err
	}
	out := st.ReconcileInstance(ctx, key)
	switch {
	case out.Stale:
		return reconcile.Result{RequeueAfter: staleRequeue}, nil
	case !out.Pending:
		in.mu.Lock()
		if in.attempted == nil {
			in.attempted = map[string]string{}
		}
		in.attempted[key] = input
		in.mu.Unlock()
	}
	return reconcile.Result{RequeueAfter: out.RequeueAfter}, nil
}

// attemptedHere is the input the last reconcile of key in this replica attempted.
func (in *Instances) attemptedHere(key string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.attempted[key]
}

// state is the state of revision sha for reconciling mi: the newest one kept,
// unless mi has been reconciled in it already (a retry or a recheck is then planned
// afresh), it planned mi at another input than its CR holds now (a Registry's
// refresh at the same revision, see RevisionState.HoldsInput), or it was built
// before the revision step wrote mi's input and cannot take it (see
// RevisionState.Take; built again, it holds it).
func (in *Instances) state(ctx context.Context, sha string, mi *cairnv1.ModuleInstance) (*reconciler.RevisionState, error) {
	key := mi.Namespace + "/" + mi.Name
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := len(in.states) - 1; i >= 0; i-- { // the newest first
		if rs := in.states[i]; rs.sha == sha && !rs.st.Reconciled(key) && (rs.st.HoldsInput(mi) || rs.st.Take(mi)) {
			return rs.st, nil
		}
	}
	began := time.Now()
	rev, err := in.Source.Read(ctx, sha, "")
	if err != nil {
		return nil, err
	}
	st, err := in.Engine.PrepareInstances(ctx, rev)
	if err != nil {
		return nil, err
	}
	in.Log.Info("built the state of a revision for the instance reconciles", "revision", sha, "for", key,
		"took", time.Since(began).Round(time.Millisecond).String())
	in.states = append(in.states, &revisionState{sha: sha, st: st})
	if len(in.states) > keptStates {
		in.states = in.states[len(in.states)-keptStates:]
	}
	return st, nil
}

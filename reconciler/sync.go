package reconciler

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"sync"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/gitsource"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/contracts"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/reconciler/report"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/reconciler/supply"
	"cairn.dev/cairn/render/declarations"
)

// SyncResult is the outcome of one sync (see outcome.SyncResult).
type SyncResult = outcome.SyncResult

// InstanceResult is what one sync did to one instance (see outcome.InstanceResult).
type InstanceResult = outcome.InstanceResult

// LastSynced returns the revision the Platform CR records as last synced ("" if none).
func (e *Engine) LastSynced(ctx context.Context) (string, error) {
	var p cairnv1.Platform
	err := e.cluster.client.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to read Platform %s: %w", cairnv1.PlatformName, err)
	}
	return p.Status.LastSyncedRevision, nil
}

// Sync reconciles the cluster to rev: it loads the declarations, decides which
// instances the change affects, renders them, applies them in dependsOn order, prunes
// what left each render (within the guards), removes instances that left Git, and
// records everything in the CRs' status.
func (e *Engine) Sync(ctx context.Context, rev Revision) (*SyncResult, error) {
	st, err := e.PrepareRevision(ctx, rev)
	if err != nil {
		return nil, err
	}
	if e.opts.Sharded {
		st.awaitAttempts(ctx) // the replicas reconcile the instances
	} else {
		st.ReconcileAll(ctx) // when interrupted, only records the instances in flight
	}
	return st.Finish(ctx)
}

// load reads the declarations of root, trusting the Platform last synced (the
// Platform CR) to tell the real Platform document from one a tenant smuggles in.
func (e *Engine) load(ctx context.Context, root fs.FS) (*declarations.Set, error) {
	opts := declarations.Options{Root: e.opts.Path, CairnNamespace: e.opts.cairnNamespace()}
	var p cairnv1.Platform
	if err := e.cluster.client.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p); err == nil {
		opts.Trusted = &p.Spec
	}
	return declarations.Load(root, opts)
}

// failRevision records an unusable revision on the Platform CR and the forge, and
// changes nothing else.
func (e *Engine) failRevision(ctx context.Context, rev Revision, f *outcome.Failure) (*SyncResult, error) {
	res := &SyncResult{Revision: rev.SHA, Error: f}
	res.RetryAt = time.Now().Add(status.RetryAfter(f.Kind, 1))
	if rev.SHA != "" {
		e.opts.Reporter.SyncStarted(rev.SHA, nil)
		defer e.opts.Reporter.SyncFinished(rev.SHA, res)
	}
	var p cairnv1.Platform
	err := e.cluster.client.Get(ctx, client.ObjectKey{Name: cairnv1.PlatformName}, &p)
	if err == nil {
		before := p.DeepCopy()
		if rev.SHA != "" {
			p.Status.LastAttemptedRevision = rev.SHA
		}
		markSourceReconcileHandled(&p)
		conditions.MarkFalse(&p, "Ready", f.Reason, "%s", f.Error())
		conditions.MarkStalled(&p, f.Reason, "%s", f.Error())
		if err := patchStatus(ctx, e.cluster.client, &p, before); err != nil {
			e.logger(ctx).Error(err, "failed to record the failed revision", "revision", rev.SHA, "reason", f.Reason)
		}
		e.emitTransition(before, &p)
	}
	return res, nil
}

// RecordSourceFailure records on the Platform CR that the repository could not be
// read at sha ("" when the head could not be resolved); nothing else changes.
func (e *Engine) RecordSourceFailure(ctx context.Context, sha string, err error) {
	reason := gitsource.Reason(err)
	f := outcome.NewStalled(cairnv1.ReasonSourceFailed, fmt.Errorf("%s: %w", reason, err))
	switch reason {
	case "Timeout", "FetchFailed", "AuthFailed", "RefNotFound":
		f.Kind = outcome.Transient
	}
	_, _ = e.failRevision(ctx, Revision{SHA: sha}, f)
}

// revisionInput is what the revision gives every phase of its sync: the revision,
// its tree and declarations, the Platform, the diff, the prune guard and the digest
// key. newRevisionFrom sets it (mirrorPlatform, which it calls, sets platform) and
// nothing changes it after, but for readOnly, which PrepareInstances clears once,
// before the plan, and the Platform's status, which recordPlatform writes as the
// sync finishes. Its methods read nothing of the cluster view, the verdicts or the
// plan, so the instance phases may share it without a lock.
type revisionInput struct {
	e        *Engine
	rev      Revision
	root     *gitsource.Tree
	set      *declarations.Set
	platform *cairnv1.Platform // the Platform CR as mirrored from Git (the declaration's copy in a plan)
	changes  changes
	guard    prune.Guard
	now      time.Time

	// digestKey keys the digests recorded over rendered objects (see DigestKeySecret).
	digestKey []byte

	removeOK bool // every file could be read: stale Registries may be removed
	// readOnly: a plan, nothing is written. A replica's state is built read-only (it
	// writes nothing of the revision step's), and PrepareInstances clears it right
	// after newRevisionFrom returns, before the plan: its instance reconciles write as
	// any sync's do.
	readOnly bool
}

// clusterView is what a sync learns of the cluster and shares between its instance
// reconciles. newRevisionFrom lists the live ModuleInstances (listLive) and creates
// the maps; the rest is read lazily, the first time a phase needs it, by whichever
// instance reconcile asks first, each part under its own lock or sync.Once, so that
// the reconciles fill it concurrently.
type clusterView struct {
	// live are cairn's ModuleInstances as the sync found them, by namespace/name
	// (listLive, while the sync is built; the map is not written after).
	live map[string]*cairnv1.ModuleInstance

	chainOnce sync.Once
	chain     *supply.Chain // see supplyChain

	capsOnce sync.Once
	caps     *clusterCapabilities // see capabilities

	// mu guards namespaces, createdNamespaces and moduleDigests. It also guards
	// instanceState.mirrored, which is the plan's, not the cluster view's (see
	// RevisionState.mirroredCR and holdInput): one lock, as before the three values.
	mu         sync.Mutex
	namespaces map[string]bool // namespaces known to exist
	// createdNamespaces are the namespaces this sync created (see checkOwnership).
	createdNamespaces map[string]bool
	// moduleDigests is filled from the revision's tree, not from the cluster, but
	// lazily and under mu, as the rest of the view (see moduleDigest).
	moduleDigests map[string]string // local module directory -> digest of its files
	// managed are cairn's labelled objects, listed once per sync for the instances
	// without a CR (see adoptedInventory).
	managed   map[schema.GroupKind]managedObjects
	managedMu sync.Mutex // guards managed
	// secretNames are the names of the Secrets of cairn's namespace, listed once per
	// sync (secretsOnce) for the instances without a CR (see leftInventory); nil
	// when the LIST failed.
	secretNames map[string]bool
	secretsOnce sync.Once
	// kinds maps kinds to their scope for placement: the cluster's mapper, its
	// misses remembered for the sync.
	kinds *missMemo
	// provides are the kinds each instance's CR records it provides (see recordedProvides).
	provides     map[string][]schema.GroupKind
	providesOnce sync.Once
}

// verdicts is what the sync decides over the revision, beyond each instance's own
// result. The plan writes removed and held (findRemoved) before any instance
// reconcile starts; inferContracts writes contracts, conflicted and cyclic and
// checkPrunes writes pruneErrs and removedSets, at the render barrier
// (decideTogether) or, in a plan, after renderAll (render); inferContracts runs
// again once the prunes are decided (provideWithdrawn) and, in a sharded sync
// without removals, from Finish. forReconciles creates the claim table, which the
// instances fill as they settle (claimObjects, under claimsMu); the removals
// (removeInstances, holdInstances) append their results as the sync finishes.
type verdicts struct {
	removed     []*cairnv1.ModuleInstance // CRs whose declaration left Git
	held        []*cairnv1.ModuleInstance // CRs whose declaration is in a file that could not be read
	pruneErrs   []error                   // the sync-wide prune refusals, one per refused owner
	removedSets map[string]removedSet     // what each removed instance would delete, by namespace/name
	// results are the outcomes of the instances the sync removed or held.
	results []InstanceResult
	// contracts are the provider contracts of the revision, inferred once its renders are done.
	contracts contracts.Set
	// cyclic are the instances in a cycle of dependsOn and contract edges: they fail.
	cyclic map[string]bool
	// conflicted are the instances that render the CRD of a kind another provides:
	// they fail and provide nothing (see failConflicts).
	conflicted map[string]bool
	// claims are the objects the instances of a sync have claimed so far, by id
	// (see claimObjects); nil in a plan.
	claims   map[string]*instanceState
	claimsMu sync.Mutex
}

func (e *Engine) newRevision(ctx context.Context, rev Revision, root *gitsource.Tree, set *declarations.Set,
	readOnly bool) (*RevisionState, error) {
	return e.newRevisionFrom(ctx, rev, root, set, readOnly, e.cluster.client)
}

// newRevisionFrom is newRevision with the live ModuleInstances read from live.
func (e *Engine) newRevisionFrom(ctx context.Context, rev Revision, root *gitsource.Tree, set *declarations.Set,
	readOnly bool, live client.Reader) (*RevisionState, error) {
	s := &RevisionState{
		revisionInput: revisionInput{
			e: e, rev: rev, root: root, set: set, changes: newChanges(rev, e.opts.Path),
			guard: prune.NewGuard(set.Platform, rev.Message), now: time.Now(),
			removeOK: len(set.Unparsed) == 0, readOnly: readOnly,
		},
		clusterView: clusterView{
			live: map[string]*cairnv1.ModuleInstance{}, namespaces: map[string]bool{},
			createdNamespaces: map[string]bool{},
			moduleDigests:     map[string]string{},
			managed:           map[schema.GroupKind]managedObjects{},
		},
		verdicts: verdicts{conflicted: map[string]bool{}},
		byKey:    map[string]*instanceState{},
	}
	s.platform = set.Platform.DeepCopy()
	if e.cluster != nil {
		s.kinds = newMissMemo(e.cluster.mapper)
	}
	key, err := e.digestKey(ctx, !readOnly)
	if err != nil {
		return nil, outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	s.digestKey = key
	if !readOnly {
		if err := s.mirrorPlatform(ctx); err != nil {
			return nil, outcome.Classify(cairnv1.ReasonApplyFailed, err)
		}
	}
	if err := s.listLive(ctx, live); err != nil {
		return nil, outcome.Classify(cairnv1.ReasonApplyFailed, err)
	}
	return s, nil
}

// listLive reads the ModuleInstances cairn manages from c: the API server, or a
// replica's informer cache (see PrepareInstances).
func (v *clusterView) listLive(ctx context.Context, c client.Reader) error {
	var list cairnv1.ModuleInstanceList
	if err := c.List(ctx, &list,
		client.MatchingLabels{cairnv1.ManagedByLabel: cairnv1.ManagedByValue}); err != nil {
		return fmt.Errorf("failed to list ModuleInstances: %w", err)
	}
	for i := range list.Items {
		mi := &list.Items[i]
		v.live[mi.Namespace+"/"+mi.Name] = mi
		v.namespaces[mi.Namespace] = true // a CR lives there: ensureNamespace need not read it
	}
	return nil
}

// finish records the sync on the Platform CR and returns the result.
func (s *RevisionState) finish(ctx context.Context) (*SyncResult, error) {
	res := &SyncResult{Revision: s.rev.SHA, Interrupted: interrupted(ctx), Unrefreshed: s.unrefreshed()}
	for _, r := range s.runs {
		res.Instances = append(res.Instances, r.result())
	}
	res.Instances = append(res.Instances, s.results...)
	retry := s.now.Add(status.StalledRecheck)
	for _, inv := range s.set.Invalid {
		ir := invalidResult(inv)
		ir.NextRetryAt = &retry
		res.Instances = append(res.Instances, ir)
	}
	sort.SliceStable(res.Instances, func(i, j int) bool {
		a, b := res.Instances[i], res.Instances[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, inv := range s.set.Invalid {
		if ns, name := splitKey(inv.Object); inv.Kind == cairnv1.ModuleInstanceKind && name != "" {
			s.e.opts.Reporter.InstanceFinished(s.rev.SHA, report.InstanceKey{Namespace: ns, Name: name}, invalidResult(inv))
		}
	}
	var affected int32
	for _, r := range s.runs {
		if r.affected {
			affected++
		}
	}
	err := s.recordPlatform(ctx, res, affected)
	s.e.opts.Reporter.SyncFinished(s.rev.SHA, res)
	return res, err
}

// markInvalid records, on the CR of each instance whose declaration is invalid, that
// this revision could not be used for it; its objects and last good state stay.
func (s *RevisionState) markInvalid(ctx context.Context) {
	for _, inv := range s.set.Invalid {
		live := s.live[inv.Object]
		if live == nil || inv.Kind != cairnv1.ModuleInstanceKind {
			continue
		}
		// Read afresh: the view may be the informer cache (see revisionStepLive),
		// behind a replica's last status write, which a merge patch of the
		// conditions computed against it would overwrite.
		if err := s.e.cluster.client.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			s.e.logger(ctx).Error(err, "failed to record an invalid declaration", "instance", inv.Object, "revision", s.rev.SHA)
			continue
		}
		before := live.DeepCopy()
		status.Failed(live, s.rev.SHA, outcome.NewStalled(inv.Reason, inv), s.now)
		if err := patchStatus(ctx, s.e.cluster.client, live, before); err != nil {
			s.e.logger(ctx).Error(err, "failed to record an invalid declaration", "instance", inv.Object, "revision", s.rev.SHA)
		}
		s.e.emitTransition(before, live)
	}
}

func invalidResult(inv *declarations.Error) InstanceResult {
	ns, name := splitKey(inv.Object)
	return InstanceResult{Namespace: ns, Name: name, Action: outcome.ActionFailed, Reason: inv.Reason, Message: inv.Error()}
}

func (in *revisionInput) recordPlatform(ctx context.Context, res *SyncResult, affected int32) error {
	p := in.platform
	before := p.DeepCopy()
	defer in.e.emitTransition(before, p)
	p.Status.ObservedGeneration = p.Generation
	p.Status.Repository = in.e.opts.Repository
	p.Status.LastAttemptedRevision = in.rev.SHA
	p.Status.Instances = countInstances(res)
	if interrupted(ctx) {
		markPlatformInterrupted(ctx, p, in.rev.SHA)
		recordSync(p, in.rev.SHA, in.now, "Interrupted", res, affected)
		ctx, cancel := apply.Finishing(ctx)
		defer cancel()
		return patchStatus(ctx, in.e.cluster.client, p, before)
	}
	p.Status.LastSyncedRevision = in.rev.SHA
	markSourceReconcileHandled(p)
	now := metav1.NewTime(in.now)
	p.Status.LastSyncTime = &now
	conditions.Delete(p, "Stalled")
	if res.Failed() {
		conditions.MarkFalse(p, "Ready", "InstancesFailed", "%d of %d instances are not ready at %s",
			p.Status.Instances.Failed, p.Status.Instances.Total, gitsource.ShortSHA(in.rev.SHA))
	} else if n := p.Status.Instances.Progressing; n > 0 {
		conditions.MarkUnknown(p, "Ready", cairnv1.ReasonProgressing, "%d of %d instances are progressing at %s (applied, not yet healthy)",
			n, p.Status.Instances.Total, gitsource.ShortSHA(in.rev.SHA))
	} else {
		conditions.MarkTrue(p, "Ready", cairnv1.ReasonSucceeded, "%d instances synced at %s",
			p.Status.Instances.Total, gitsource.ShortSHA(in.rev.SHA))
	}
	recordSync(p, in.rev.SHA, in.now, conditions.GetReason(p, "Ready"), res, affected)
	return patchStatus(ctx, in.e.cluster.client, p, before)
}

// recordSync adds the sync of rev that started at started to the Platform's recent
// syncs, newest first; affected counts the instances the revision affected (their
// outcome, taken from their CRs in a sharded sync, does not say whether they
// applied anything).
func recordSync(p *cairnv1.Platform, rev string, started time.Time, result string, res *SyncResult, affected int32) {
	r := cairnv1.SyncRecord{Revision: rev, Started: metav1.NewTime(started), Result: result, Changed: affected,
		Duration: metav1.Duration{Duration: time.Since(started).Round(time.Millisecond)}}
	for _, i := range res.Instances {
		switch {
		case i.Action == outcome.ActionFailed:
			r.Failed++
			if i.Reason == cairnv1.ReasonPruneGuard {
				r.PruneGuard++
			}
		case i.Action == outcome.ActionDeleted:
			r.Changed++
		}
		if len(i.Warnings) > 0 {
			r.Warnings++
		}
	}
	p.Status.RecentSyncs = append([]cairnv1.SyncRecord{r}, p.Status.RecentSyncs...)
	if len(p.Status.RecentSyncs) > cairnv1.MaxRecentSyncs {
		p.Status.RecentSyncs = p.Status.RecentSyncs[:cairnv1.MaxRecentSyncs]
	}
}

func countInstances(res *SyncResult) cairnv1.InstanceCounts {
	var c cairnv1.InstanceCounts
	for _, i := range res.Instances {
		if i.Action == outcome.ActionDeleted {
			continue
		}
		c.Total++
		switch {
		case i.Ready:
			c.Ready++
		case i.Action == outcome.ActionFailed:
			c.Failed++
		case i.Action == outcome.ActionProgressing:
			c.Progressing++
		}
	}
	return c
}

// supplyChain returns the sync's view of its Registries, loaded (Secrets,
// ConfigMaps, keys) the first time a sync needs it: a drift check or a sync that
// renders nothing reads none of them.
func (s *RevisionState) supplyChain(ctx context.Context) *supply.Chain {
	s.chainOnce.Do(func() {
		s.chain = newSupplyChain(ctx, s.e.secrets(), s.e.opts, s.e.verifier, s.set.Platform, s.set.Registries)
	})
	return s.chain
}

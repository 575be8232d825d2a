package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/hooks"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/status"
	"cairn.dev/cairn/render"
	"cairn.dev/cairn/render/declarations"
)

// removeInstances deletes the objects of instances that left Git, dependents first,
// then their CRs, unless the prune guards refuse. An instance held by a file that could
// not be read is not removed: it is marked failed and keeps its objects.
func (s *RevisionState) removeInstances(ctx context.Context) {
	s.holdInstances(ctx)
	for _, live := range removalOrder(s.removed) {
		res := InstanceResult{Namespace: live.Namespace, Name: live.Name}
		if status.SuspendAnnotated(live) { // an emergency stop holds the removal too
			res.Action, res.Reason = outcome.ActionSkipped, cairnv1.ReasonSuspended
			res.Message = "removed from Git but suspended in the cluster: nothing is deleted until `cairn resume`"
			s.results = append(s.results, res)
			continue
		}
		if status.HoldRequested(live) != nil { // a hold keeps its objects, whatever Git says
			res.Action, res.Reason = outcome.ActionSkipped, cairnv1.ReasonHeld
			res.Message = "removed from Git but held in the cluster: nothing is deleted until `cairn release`"
			s.results = append(s.results, res)
			continue
		}
		if due, why := retryDue(live, s.rev.SHA, s.now); !status.IsReady(live) && !due {
			s.results = append(s.results, deferredResult(res, live, why))
			continue
		}
		began := time.Now()
		if f := s.removeInstance(ctx, live, &res); f != nil {
			res.Action, res.Reason, res.Message, res.Retry = outcome.ActionFailed, f.Reason, f.Error(), f.Kind
			s.recordRemovalFailure(ctx, live, f)
			res.NextRetryAt = retryTime(live)
		}
		res.Duration = time.Since(began)
		s.results = append(s.results, res)
		s.e.emitRemoval(live, res, s.rev.SHA)
		s.e.opts.Reporter.InstanceFinished(s.rev.SHA, keyOf(live), res)
	}
}

func (s *RevisionState) removeInstance(ctx context.Context, live *cairnv1.ModuleInstance, res *InstanceResult) *outcome.Failure {
	rs := s.removedSets[live.Namespace+"/"+live.Name]
	if rs.Set != nil && rs.Refused != nil {
		return outcome.Classify(cairnv1.ReasonPruneGuard, rs.Refused)
	}
	if f := s.dependentsRemain(live); f != nil {
		return f // nothing of it is deleted
	}
	if rs.err != nil {
		return outcome.NewTransient(cairnv1.ReasonPruneFailed, rs.err)
	}
	m, err := s.e.cluster.Manager(live.Namespace, s.removalIdentity(live))
	if err != nil {
		return outcome.NewTransient(cairnv1.ReasonPruneFailed, err)
	}
	if !pruneEnabled(live) {
		return s.orphanInstance(ctx, m.Client(), live, rs, res)
	}
	ps := rs.Set
	var rec hooks.Record
	if hasHookRecord(live) {
		if rec, err = hooks.LoadRecord(ctx, s.e.cluster.client, s.e.namespace(), live); err != nil {
			return outcome.NewTransient(cairnv1.ReasonPruneFailed, err)
		}
	}
	if f := s.runDeleteHooks(ctx, m.Client(), live, rec.Delete, render.HookPreDelete); f != nil {
		return f // nothing is deleted
	}
	s.step(live.Namespace+"/"+live.Name, "remove %s/%s: %d objects", live.Namespace, live.Name, len(ps.Stale))
	cs, err := apply.DeleteStale(ctx, m, ps.Stale, ps.Key, ps.UID, s.inlineWait(s.e.opts.DefaultTimeout))
	res.Pruned = countDeleted(cs)
	if err == nil {
		err = hooks.DeleteLeft(ctx, m.Client(), hooks.OwnerOf(live), rec.Left)
	}
	if err != nil {
		return outcome.Classify(cairnv1.ReasonPruneFailed, err)
	}
	if f := s.runDeleteHooks(ctx, m.Client(), live, rec.Delete, render.HookPostDelete); f != nil {
		return f
	}
	if err := s.deleteCR(ctx, live); err != nil {
		return outcome.NewTransient(cairnv1.ReasonPruneFailed, err)
	}
	res.Action, res.Reason, res.Message = outcome.ActionDeleted, "Removed", fmt.Sprintf("removed from Git: %d objects deleted%s", res.Pruned, keptNote(ps))
	return nil
}

// orphanInstance removes the CR of an instance with prune: false and leaves its
// objects in place, without cairn's labels (see orphanObjects), as the instance's
// identity.
func (in *revisionInput) orphanInstance(ctx context.Context, c client.Client, live *cairnv1.ModuleInstance, rs removedSet,
	res *InstanceResult) *outcome.Failure {
	objects, err := rs.orphan.Objects()
	if err != nil {
		return outcome.NewStalled(cairnv1.ReasonPruneFailed, err)
	}
	in.step(live.Namespace+"/"+live.Name, "remove %s/%s: orphan %d objects (prune: false)", live.Namespace, live.Name, len(objects))
	n, err := apply.OrphanObjects(ctx, c, objects, rs.Key, string(live.UID))
	if err != nil {
		return outcome.Classify(cairnv1.ReasonPruneFailed, err)
	}
	if err := in.deleteCR(ctx, live); err != nil {
		return outcome.NewTransient(cairnv1.ReasonPruneFailed, err)
	}
	res.Action, res.Reason = outcome.ActionDeleted, "Removed"
	res.Message = fmt.Sprintf("removed from Git: prune is false, orphaned %d objects (left in place without cairn's labels)", n)
	return nil
}

// heldFile returns the file that could not be read and may still declare live, an
// instance no file that was read declares: the file its CR records as its source
// (sourceAnnotation) when that file is unparsed, or, for a CR that records none, the
// unparsed files (conservatively, any of them may declare it).
func (in *revisionInput) heldFile(live *cairnv1.ModuleInstance) (string, bool) {
	if len(in.set.Unparsed) == 0 {
		return "", false
	}
	src, recorded := live.Annotations[sourceAnnotation]
	if !recorded || src == "" {
		return strings.Join(in.set.Unparsed, ", "), true
	}
	return src, slices.Contains(in.set.Unparsed, src)
}

// heldFailure says why a held instance is neither applied nor removed, with the problem
// of its file.
func (in *revisionInput) heldFailure(live *cairnv1.ModuleInstance) *outcome.Failure {
	file, _ := in.heldFile(live)
	if src := live.Annotations[sourceAnnotation]; src == "" {
		return outcome.Failuref(outcome.Stalled, cairnv1.ReasonInvalidDeclaration,
			"instance is not declared in the files that could be read, and its CR does not record its source file: "+
				"not removing it while files could not be read (%s)", file)
	}
	why := "could not be read"
	for _, inv := range in.set.Invalid {
		if inv.File == file && inv.Object == "" {
			why = inv.Error()
			break
		}
	}
	return outcome.Failuref(outcome.Stalled, cairnv1.ReasonInvalidDeclaration,
		"declared in %s, which could not be read (%s): keeping its objects and last good state, not removing it", file, why)
}

// holdInstances marks failed the instances held by a file that could not be read.
func (s *RevisionState) holdInstances(ctx context.Context) {
	for _, live := range s.held {
		f := s.heldFailure(live)
		res := InstanceResult{Namespace: live.Namespace, Name: live.Name, Action: outcome.ActionFailed, Reason: f.Reason, Message: f.Error(), Retry: f.Kind}
		if !s.readOnly {
			s.recordRemovalFailure(ctx, live, f)
		}
		res.NextRetryAt = retryTime(live)
		s.results = append(s.results, res)
		s.e.opts.Reporter.InstanceFinished(s.rev.SHA, keyOf(live), res)
	}
}

// deleteCR deletes the CR of a removed instance, its inventory Secret and, when it
// may have one (hasHookRecord), its hook record.
// An inline inventory is cleared first, so the controller does not take the
// deletion for a hand delete and keep the inventory (see Engine.KeepInventoryOfDeleted).
func (in *revisionInput) deleteCR(ctx context.Context, live *cairnv1.ModuleInstance) error {
	if inv := live.Status.Inventory; inv != nil && len(inv.Entries) > 0 {
		before := live.DeepCopy()
		live.Status.Inventory = &cairnv1.Inventory{}
		if err := patchStatus(ctx, in.e.cluster.client, live, before); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to clear the inventory of ModuleInstance %s/%s: %w", live.Namespace, live.Name, err)
		}
	}
	if err := in.e.inventories().Remove(ctx, live); err != nil {
		return err
	}
	if hasHookRecord(live) {
		if err := hooks.RemoveRecord(ctx, in.e.cluster.client, in.e.namespace(), live); err != nil {
			return err
		}
	}
	in.e.deletedCRs.Store(true) // before the delete: a failed one may still have happened
	if err := in.e.cluster.client.Delete(ctx, live); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete ModuleInstance %s/%s: %w", live.Namespace, live.Name, err)
	}
	return nil
}

func (in *revisionInput) recordRemovalFailure(ctx context.Context, live *cairnv1.ModuleInstance, f *outcome.Failure) {
	before := live.DeepCopy()
	status.Failed(live, in.rev.SHA, f, in.now)
	if err := patchStatus(ctx, in.e.cluster.client, live, before); err != nil {
		in.e.logger(ctx).Error(err, "failed to record status", "instance", live.Namespace+"/"+live.Name, "revision", in.rev.SHA)
	}
	in.e.emitTransition(before, live)
}

// removalOrder puts dependents (by dependsOn, or requiring a kind another
// provides) before the instances they depend on.
func removalOrder(removed []*cairnv1.ModuleInstance) []*cairnv1.ModuleInstance {
	left := map[string]*cairnv1.ModuleInstance{}
	for _, mi := range removed {
		left[mi.Namespace+"/"+mi.Name] = mi
	}
	var out []*cairnv1.ModuleInstance
	for len(left) > 0 {
		next := leaves(left)
		for _, k := range next {
			out = append(out, left[k])
			delete(left, k)
		}
	}
	return out
}

// leaves returns, sorted, the instances no other remaining instance depends on (all
// of them when a cycle leaves none).
func leaves(left map[string]*cairnv1.ModuleInstance) []string {
	needed := map[string]bool{}
	for _, mi := range left {
		for _, d := range declarations.DependencyIDs(mi) {
			needed[d] = true
		}
		for _, req := range mi.Status.Requires { // a provider goes after its requirers
			needed[req.Instance] = true
		}
	}
	var out []string
	for k := range left {
		if !needed[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		for k := range left {
			out = append(out, k)
		}
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }

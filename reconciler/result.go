package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/apply"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/reconciler/secretgen"
	"cairn.dev/cairn/reconciler/status"
)

// resultView is what an instance's result at a revision reads: its plan, its CR
// and failure, its render's size, prune verdict and warnings, and what its
// reconcile wrote (nothing when none ran). instanceReconcile.view and
// instanceState.view give it.
type resultView struct {
	*instancePlan
	live       *cairnv1.ModuleInstance
	failure    *outcome.Failure
	warnings   []string
	objects    int // rendered
	withheld   apply.Inventory
	prune      *prune.Set
	wrote      *written
	secrets    []*secretgen.Decl
	secretNote string
	started    time.Time
	// created: its reconcile recorded the instance's first render applied.
	created bool
}

// summary is the Ready message of a successful sync.
func (r resultView) summary() string {
	applied, unchanged := countApplied(r.wrote.report.Changes)
	msg := fmt.Sprintf("%d objects applied (%d changed, %d unchanged)", r.objects, applied, unchanged)
	if n := countDeleted(r.wrote.pruned); n > 0 {
		msg += fmt.Sprintf(", %d pruned", n)
	}
	if gen := secretgen.Summary(r.secrets); gen != "" {
		msg += "; " + gen
	}
	if len(r.wrote.hooksRan) > 0 {
		msg += "; hooks run: " + strings.Join(r.wrote.hooksRan, ", ")
	}
	return msg + keptNote(r.prune)
}

// readyMessage is the Ready message of a successful sync: the summary, then the
// warnings, so that `kubectl get mi` and `cairn status` show them.
func (r resultView) readyMessage() string {
	return r.summary() + warningNote(r.warnings)
}

// readyReason is the reason of the Ready condition of a successful sync:
// ContractWithdrawn when it kept a CRD its render dropped, else Succeeded.
func (r resultView) readyReason() string {
	if len(r.withheld) > 0 {
		return cairnv1.ReasonContractWithdrawn
	}
	return cairnv1.ReasonSucceeded
}

// warningNote is the end of a message that carries warnings ("" without any).
func warningNote(warnings []string) string {
	if len(warnings) == 0 {
		return ""
	}
	return "; warnings: " + strings.Join(warnings, "; ")
}

// logOutcome logs what the sync did to the instance: an error for a failure (with its
// reason and kind), else one info line (with the warnings, if any).
func (in *revisionInput) logOutcome(ctx context.Context, r resultView) {
	log := in.e.logger(ctx).WithValues("instance", r.key(), "revision", in.rev.SHA)
	if r.failure != nil && r.failure.Kind == outcome.Progressing {
		log.Info("instance applied, not yet healthy; rechecked later", "message", r.failure.Error())
		return
	}
	if r.failure != nil {
		log.Error(r.failure, "instance failed", "reason", r.failure.Reason, "retry", r.failure.Kind)
		return
	}
	res := r.result()
	log.Info("instance synced", "action", res.Action, "applied", res.Applied, "unchanged", res.Unchanged,
		"pruned", res.Pruned, "warnings", len(r.warnings))
	for _, w := range r.warnings {
		log.Info("warning", "warning", w)
	}
}

func (r resultView) outcome() string {
	if r.failure != nil && r.failure.Kind == outcome.Progressing {
		return "progressing: " + r.failure.Error()
	}
	if r.failure != nil {
		return fmt.Sprintf("failed (%s): %s", r.failure.Reason, r.failure.Error())
	}
	return "ready: " + r.readyMessage()
}

// ready reports whether the instance is ready after this sync.
func (r resultView) ready() bool {
	if !r.affected {
		return status.IsReady(r.live)
	}
	return r.failure == nil
}

// suspended reports whether the instance is suspended: in Git (spec.suspend) or in
// the cluster (the annotation on its CR).
func (r resultView) suspended() bool {
	return r.mi.Spec.Suspend || status.SuspendAnnotated(r.live)
}

// satisfiesDependents reports whether the instances that depend on it may go
// ahead: it is ready, or it is suspended with its last attempt successful (its
// objects stay).
func (r resultView) satisfiesDependents() bool {
	if r.suspended() || r.held {
		return r.live != nil && r.live.Status.LastAppliedRevision != "" && r.live.Status.Failures == 0
	}
	return r.ready()
}

// result is the instance's result at this revision, from what its reconcile did.
func (r resultView) result() InstanceResult {
	res := InstanceResult{Namespace: r.mi.Namespace, Name: r.mi.Name, Ready: r.ready(), Warnings: r.warnings}
	res.Applied, res.Unchanged = countApplied(r.wrote.report.Changes)
	res.Created, res.Pruned = countAction(r.wrote.report.Changes, ssa.CreatedAction), countAction(r.wrote.pruned, ssa.DeletedAction)
	if !r.started.IsZero() {
		res.Duration = time.Since(r.started)
	}
	switch {
	case r.suspended():
		res.Action, res.Reason, res.Message = outcome.ActionSkipped, "Suspended", "suspended"
	case r.held:
		res.Action, res.Reason, res.Message = outcome.ActionSkipped, cairnv1.ReasonHeld, r.why
	case !r.affected && !status.IsReady(r.live) && r.live != nil:
		res = deferredResult(res, r.live, r.why)
	case !r.affected:
		res.Action, res.Reason, res.Message = outcome.ActionUnchanged, "", r.why+r.secretNote
	case r.failure != nil && r.failure.Kind == outcome.Progressing:
		res.Action, res.Reason, res.Message, res.Retry = outcome.ActionProgressing, r.failure.Reason, r.failure.Error(), outcome.Progressing
		res.NextRetryAt = retryTime(r.live)
	case r.failure != nil:
		res.Action, res.Reason, res.Message, res.Retry = outcome.ActionFailed, r.failure.Reason, r.failure.Error(), r.failure.Kind
		res.NextRetryAt = retryTime(r.live)
	case r.created:
		res.Action, res.Reason, res.Message = outcome.ActionCreated, r.readyReason(), r.summary()
	default:
		res.Action, res.Reason, res.Message = outcome.ActionUpdated, r.readyReason(), r.summary()
	}
	return res
}

// result is r's result at this revision: as the replica that reconciled it
// records it, as its reconcile left it, or, when none ran, as planned and rendered.
func (r *instanceState) result() InstanceResult {
	if r.remote != nil {
		return r.remote.Result
	}
	if r.final != nil {
		return *r.final
	}
	return r.view().result()
}

// suspended reports whether r is suspended as the revision step found it.
func (r *instanceState) suspended() bool { return r.view().suspended() }

// satisfiesDependents reports whether the instances that depend on r may go ahead.
func (r *instanceState) satisfiesDependents() bool {
	if r.final != nil { // reconciled: affected, so not suspended when planned
		return r.final.Ready
	}
	return r.view().satisfiesDependents()
}

func countApplied(cs *ssa.ChangeSet) (changed, unchanged int) {
	if cs == nil {
		return 0, 0
	}
	for _, e := range cs.Entries {
		switch e.Action {
		case ssa.CreatedAction, ssa.ConfiguredAction:
			changed++
		case ssa.UnchangedAction:
			unchanged++
		}
	}
	return changed, unchanged
}

func countDeleted(cs *ssa.ChangeSet) int { return countAction(cs, ssa.DeletedAction) }

// countAction counts the entries of cs with action a.
func countAction(cs *ssa.ChangeSet, a ssa.Action) int {
	if cs == nil {
		return 0
	}
	n := 0
	for _, e := range cs.Entries {
		if e.Action == a {
			n++
		}
	}
	return n
}

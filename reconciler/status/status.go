// Package status is the status of a ModuleInstance as a function of what its
// reconcile did: the conditions kstatus reads (Ready, Stalled, Reconciling), Verified,
// the failure count and next retry, the revisions and digests of the last good state,
// and the history of the renders applied. Nothing here writes to the cluster: the engine builds an Attempt,
// Record sets the status from it, and the engine patches it.
package status

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

const (
	// historyLimit is how many renders the history keeps at least.
	historyLimit = 10
	// StalledRecheck is when a stalled instance (or an invalid declaration) is tried again.
	StalledRecheck   = 30 * time.Minute
	transientBackoff = 5 * time.Second
	maxBackoff       = 5 * time.Minute
	healthRecheckMax = 30 * time.Second
)

// Attempt is what one instance reconcile did, as the instance's status records it.
type Attempt struct {
	// Revision is the source revision attempted, at Now.
	Revision string
	Now      time.Time
	// Input is the input digest the reconcile attempted, with the OCI artifacts its
	// render used; empty when the revision did not affect the instance (its
	// attempt then rechecks the last one: the last attempted input stays).
	Input     string
	Artifacts []cairnv1.ArtifactStatus
	// Forced: a requested reconcile, handled whatever the outcome.
	Forced bool
	// Failure is why the attempt failed; nil when it succeeded.
	Failure *outcome.Failure
	// Applied is the state a success moves the instance to; a failure leaves the
	// last good state as it was and ignores it.
	Applied Applied
	// Render is the render the attempt applied, whatever became of it after its
	// apply (health, prune, hooks); nil when it applied none (it failed before or at
	// its apply). The history records it.
	Render *Render
	// Keep is the Platform's render.publish.keep: the history holds max(10, Keep)
	// renders.
	Keep int
	// Took is how long the reconcile took (zero: unknown).
	Took time.Duration
}

// Render is a render an attempt applied, as its history entry records it.
type Render struct {
	// Digest is the keyed render digest; Objects counts its objects.
	Digest  string
	Objects int32
	// Revision is the revision the render is of, when not the attempt's (a
	// rollback applies a render of an earlier revision).
	Revision string
	// Published is its signed artifact (nil: renders are not published).
	Published *cairnv1.PublishedArtifact
}

// Applied is the last good state a successful attempt records.
type Applied struct {
	SourceDigest, ValuesDigest, RenderDigest, CapabilitiesDigest string
	// ServiceAccount is the identity the objects were applied as.
	ServiceAccount string
	// Provides and Requires are the instance's provider contracts as its render
	// shows them.
	Provides []string
	Requires []cairnv1.ContractRequirement
	// Published is the signed artifact of the render (nil: not published, the last
	// one stays).
	Published *cairnv1.PublishedArtifact
	// Reason and Message are Ready's.
	Reason, Message string
}

// Record sets mi's status from the attempt a: on success the new revision, digests
// and contracts; on failure only the attempt, its retry and its conditions (the
// last applied revision, digests and inventory stay). The inventory is not Record's:
// the engine stores it before.
func Record(mi *cairnv1.ModuleInstance, a Attempt) {
	if HoldRequested(mi) == nil && IsHeld(mi) {
		Release(mi) // released (`cairn release`, or --until-change): this attempt is Git's again
	}
	if a.Input != "" {
		mi.Status.LastAttemptedInput = a.Input
		mi.Status.Artifacts = a.Artifacts
		Verified(mi, a.Artifacts)
	}
	if a.Forced {
		mi.Status.LastHandledReconcileAt = mi.Annotations[cairnv1.ReconcileRequestAnnotation]
	}
	addHistory(mi, a)
	if a.Failure != nil {
		Failed(mi, a.Revision, a.Failure, a.Now)
		return
	}
	s := a.Applied
	mi.Status.SourceDigest = s.SourceDigest
	mi.Status.ValuesDigest = s.ValuesDigest
	mi.Status.RenderDigest = s.RenderDigest
	mi.Status.CapabilitiesDigest = s.CapabilitiesDigest
	mi.Status.ServiceAccount = s.ServiceAccount
	mi.Status.Provides = s.Provides
	mi.Status.Requires = s.Requires
	if s.Published != nil {
		mi.Status.Published = s.Published
	}
	Succeeded(mi, a.Revision, s.Reason, s.Message)
}

// Succeeded records a successful sync of revision on mi, Ready for reason.
func Succeeded(mi *cairnv1.ModuleInstance, revision, reason, message string) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.LastAttemptedRevision = revision
	mi.Status.LastAppliedRevision = revision
	mi.Status.Failures = 0
	mi.Status.NextRetryAt = nil
	conditions.Delete(mi, "Reconciling")
	conditions.Delete(mi, "Stalled")
	conditions.MarkTrue(mi, "Ready", reason, "%s", message)
}

// Failed records a failed attempt of revision on mi; the last applied revision,
// digests and inventory are left as they were.
func Failed(mi *cairnv1.ModuleInstance, revision string, f *outcome.Failure, now time.Time) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.LastAttemptedRevision = revision
	mi.Status.Failures++
	retry := metav1.NewTime(now.Add(RetryAfter(f.Kind, mi.Status.Failures)))
	mi.Status.NextRetryAt = &retry
	msg := f.Error()
	if f.Kind == outcome.Progressing { // applied, health not known yet: kstatus InProgress
		conditions.MarkUnknown(mi, "Ready", f.Reason, "%s", msg)
		conditions.Delete(mi, "Stalled")
		conditions.MarkReconciling(mi, f.Reason, "%s", msg)
		return
	}
	conditions.MarkFalse(mi, "Ready", f.Reason, "%s", msg)
	switch f.Kind {
	case outcome.Stalled:
		conditions.MarkStalled(mi, f.Reason, "%s", msg)
		conditions.Delete(mi, "Reconciling")
	default:
		conditions.Delete(mi, "Stalled")
		conditions.MarkReconciling(mi, f.Reason, "%s", msg)
	}
}

// RetryAfter is 5s·2ⁿ capped at 5m for transient and waiting failures, 30m for
// stalled ones, and 5s·2ⁿ capped at 30s for a health check handed over (Progressing).
func RetryAfter(kind outcome.Kind, failures int32) time.Duration {
	switch kind {
	case outcome.Stalled:
		return StalledRecheck
	case outcome.Progressing:
		return backoff(failures, healthRecheckMax)
	}
	return backoff(failures, maxBackoff)
}

func backoff(failures int32, limit time.Duration) time.Duration {
	d := transientBackoff
	for i := int32(1); i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// HistoryLimit is how many renders an instance's history holds when the Platform
// keeps the published artifacts of its last keep renders: max(10, keep).
func HistoryLimit(keep int) int { return max(historyLimit, keep) }

// addHistory records the render a applied, newest first. The same render as the
// newest entry's (a health recheck, a retry, a commit that renders the same
// objects) adds no entry: the entry's result, reason and artifact are updated,
// its revision and time stay those of the render's first apply, so the history
// counts distinct renders applied and keeps saying when each went in. An attempt
// that applied nothing leaves the history as it was.
func addHistory(mi *cairnv1.ModuleInstance, a Attempt) {
	if a.Render == nil {
		return
	}
	result, reason := historyResult(a)
	h := mi.Status.History
	if len(h) > 0 && h[0].RenderDigest == a.Render.Digest {
		h[0].Result, h[0].Reason = result, reason
		if a.Render.Published != nil {
			h[0].Published = a.Render.Published
		}
		return
	}
	revision := a.Revision
	if a.Render.Revision != "" {
		revision = a.Render.Revision
	}
	entry := cairnv1.HistoryEntry{Revision: revision, Time: metav1.NewTime(a.Now), Result: result, Reason: reason,
		RenderDigest: a.Render.Digest, Objects: a.Render.Objects, Published: a.Render.Published}
	if a.Took > 0 {
		entry.Duration = &metav1.Duration{Duration: a.Took.Round(time.Millisecond)}
	}
	h = append([]cairnv1.HistoryEntry{entry}, h...)
	mi.Status.History = h[:min(len(h), HistoryLimit(a.Keep))]
}

// historyResult is what became of the render a applied: Ready with the Ready
// condition's reason, Progressing while its health is not known, else Failed with
// the failure's reason.
func historyResult(a Attempt) (result, reason string) {
	switch {
	case a.Failure == nil:
		return cairnv1.HistoryReady, a.Applied.Reason
	case a.Failure.Kind == outcome.Progressing:
		return cairnv1.HistoryProgressing, a.Failure.Reason
	}
	return cairnv1.HistoryFailed, a.Failure.Reason
}

// IsReady reports whether mi's Ready condition is True.
func IsReady(mi *cairnv1.ModuleInstance) bool {
	return mi != nil && conditions.IsTrue(mi, "Ready")
}

// SetReady sets the Ready condition of obj.
func SetReady(obj conditions.Setter, ready bool, reason, message string) {
	if ready {
		conditions.MarkTrue(obj, "Ready", reason, "%s", message)
		return
	}
	conditions.MarkFalse(obj, "Ready", reason, "%s", message)
}

// Verified sets the Verified condition from the artifacts of the attempt: True
// when all verified, False naming the first that did not; none for an instance
// without OCI artifacts.
func Verified(mi *cairnv1.ModuleInstance, artifacts []cairnv1.ArtifactStatus) {
	if len(artifacts) == 0 {
		conditions.Delete(mi, cairnv1.VerifiedCondition)
		return
	}
	for _, a := range artifacts {
		switch a.Verification {
		case cairnv1.VerificationVerified:
			continue
		case cairnv1.VerificationFailed:
			conditions.MarkFalse(mi, cairnv1.VerifiedCondition, a.Reason, "%s: %s", a.Ref, a.Message)
		default:
			conditions.MarkFalse(mi, cairnv1.VerifiedCondition, cairnv1.ReasonNotVerified, "%s: %s", a.Ref, a.Message)
		}
		return
	}
	conditions.MarkTrue(mi, cairnv1.VerifiedCondition, cairnv1.ReasonVerified,
		"%d artifacts verified by digest with the Registry's cosign keys (key-based: no transparency log or certificate checks)", len(artifacts))
}

// suspendedMessage is the Ready message of a suspended instance; byAnnotation is the
// one of an instance suspended in the cluster (cairn suspend), not in Git.
const (
	suspendedMessage = "suspended: its objects are left as they are (no apply, prune or drift correction); " +
		"set spec.suspend: false to resume"
	suspendedByAnnotation = "suspended in the cluster (annotation " + cairnv1.SuspendAnnotation + ", `cairn suspend`): " +
		"its objects are left as they are (no apply, prune or drift correction) whatever Git says; `cairn resume` resumes it"
)

// SuspendAnnotated reports whether the CR carries the suspend annotation.
func SuspendAnnotated(live *cairnv1.ModuleInstance) bool {
	return live != nil && live.Annotations[cairnv1.SuspendAnnotation] == "true"
}

// Suspended sets Ready=Unknown/Suspended; the last applied revision, digests,
// inventory and history stay as they were.
func Suspended(mi *cairnv1.ModuleInstance, byAnnotation bool) {
	mi.Status.ObservedGeneration = mi.Generation
	mi.Status.NextRetryAt = nil
	conditions.Delete(mi, "Reconciling")
	conditions.Delete(mi, "Stalled")
	msg := suspendedMessage
	if byAnnotation {
		msg = suspendedByAnnotation
	}
	conditions.MarkUnknown(mi, "Ready", cairnv1.ReasonSuspended, "%s", msg)
}

// IsSuspended reports whether mi's CR records it as suspended.
func IsSuspended(mi *cairnv1.ModuleInstance) bool {
	return mi != nil && conditions.GetReason(mi, "Ready") == cairnv1.ReasonSuspended
}

// SuspendedAs reports whether live records the suspension the way it is now (by
// spec or by annotation), so that nothing needs to be written.
func SuspendedAs(live *cairnv1.ModuleInstance) bool {
	want := suspendedMessage
	if SuspendAnnotated(live) {
		want = suspendedByAnnotation
	}
	return IsSuspended(live) && conditions.GetMessage(live, "Ready") == want
}

// HoldRequested is the hold the CR's annotation asks for (nil: none, or a
// release). A value that is not a HoldRequest as JSON still holds, naming nobody:
// the annotation's presence is the request.
func HoldRequested(live *cairnv1.ModuleInstance) *cairnv1.HoldRequest {
	if req := holdAnnotation(live); req != nil && !req.Release {
		return req
	}
	return nil
}

// ReleaseRequested is the release the CR's annotation asks for (`cairn release`,
// naming who asked), or nil.
func ReleaseRequested(live *cairnv1.ModuleInstance) *cairnv1.HoldRequest {
	if req := holdAnnotation(live); req != nil && req.Release {
		return req
	}
	return nil
}

func holdAnnotation(live *cairnv1.ModuleInstance) *cairnv1.HoldRequest {
	if live == nil {
		return nil
	}
	v, ok := live.Annotations[cairnv1.HoldAnnotation]
	if !ok {
		return nil
	}
	var req cairnv1.HoldRequest
	if json.Unmarshal([]byte(v), &req) != nil {
		req = cairnv1.HoldRequest{}
	}
	return &req
}

// ReleasedBy says who released a hold, for its Event.
func ReleasedBy(req *cairnv1.HoldRequest) string {
	if req == nil || req.By == "" {
		return "released (cairn release): new commits apply again"
	}
	return "released by " + heldBy(req) + " (cairn release): new commits apply again"
}

// Hold records on mi that it is held at the render it last applied (the newest
// entry of its history, else its last good state: its revision, digest and
// published artifact; inputDigest its input as held) as req asks: status.held and Held=True naming them. It returns false when mi has
// no render applied to hold (nothing is recorded).
func Hold(mi *cairnv1.ModuleInstance, req *cairnv1.HoldRequest, inputDigest string, now time.Time) bool {
	st := &mi.Status
	if st.LastAppliedRevision == "" {
		return false
	}
	held := cairnv1.HeldRender{Revision: st.LastAppliedRevision, RenderDigest: st.RenderDigest, Published: st.Published}
	if len(st.History) > 0 { // the render applied last, whatever became of it: what the cluster runs
		h := st.History[0]
		held = cairnv1.HeldRender{Revision: h.Revision, RenderDigest: h.RenderDigest, Published: h.Published}
	}
	since := metav1.NewTime(now)
	if SameHold(st.Held, req) { // recorded before (its input now known): held since then
		since = st.Held.Since
	}
	st.Held = &cairnv1.HeldRender{Revision: held.Revision, RenderDigest: held.RenderDigest, Published: held.Published,
		InputDigest: inputDigest, By: heldBy(req), At: req.At, UntilChange: req.UntilChange, Since: since}
	reason := cairnv1.ReasonHeld
	if req.To != "" && req.To == st.Held.RenderDigest {
		reason = cairnv1.ReasonRolledBack
	}
	conditions.MarkTrue(mi, cairnv1.HeldCondition, reason, "%s", HeldMessage(st.Held))
	return true
}

// maxHeldBy bounds the name of who asked for a hold, as recorded.
const maxHeldBy = 256

// heldBy is who asked for req, as recorded: the annotation is anyone's to write,
// and the condition stays short.
func heldBy(req *cairnv1.HoldRequest) string {
	if len(req.By) > maxHeldBy {
		return req.By[:maxHeldBy] + "…"
	}
	return req.By
}

// SameHold tells whether h records the hold req asks for.
func SameHold(h *cairnv1.HeldRender, req *cairnv1.HoldRequest) bool {
	return h != nil && req != nil && h.By == heldBy(req) && h.UntilChange == req.UntilChange && h.At.Equal(req.At)
}

// HeldMessage says what h holds, by whom and since when, and how it ends.
func HeldMessage(h *cairnv1.HeldRender) string {
	who := ""
	if h.By != "" {
		who = " by " + h.By
	}
	ends := "new commits are not applied until `cairn release`"
	if h.UntilChange {
		ends = "new commits are not applied until one changes this instance's declaration or module, or `cairn release`"
	}
	return fmt.Sprintf("held at %s (revision %s)%s since %s: %s", orNone(h.RenderDigest), shortSHA(h.Revision), who,
		h.Since.UTC().Format(time.RFC3339), ends)
}

// Release records on mi that it is no longer held.
func Release(mi *cairnv1.ModuleInstance) {
	mi.Status.Held = nil
	conditions.Delete(mi, cairnv1.HeldCondition)
}

// IsHeld reports whether mi's status records a hold.
func IsHeld(mi *cairnv1.ModuleInstance) bool { return mi != nil && mi.Status.Held != nil }

func orNone(s string) string {
	if s == "" {
		return "(no render digest)"
	}
	return s
}

func shortSHA(sha string) string { return sha[:min(len(sha), 12)] }

// oneRender tells whether the entries are all of one render.
func oneRender(entries []*cairnv1.HistoryEntry) bool {
	for _, h := range entries {
		if h.RenderDigest != entries[0].RenderDigest {
			return false
		}
	}
	return true
}

// RollbackTarget is the render of mi's history that to names: its render digest,
// or the revision it was applied at (a SHA, or a prefix of at least 7). An
// unknown or ambiguous target is an error naming what the history holds.
func RollbackTarget(mi *cairnv1.ModuleInstance, to string) (*cairnv1.HistoryEntry, error) {
	var found []*cairnv1.HistoryEntry
	for i := range mi.Status.History {
		h := &mi.Status.History[i]
		if h.RenderDigest == to || len(to) >= 7 && strings.HasPrefix(h.Revision, to) {
			found = append(found, h)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1 && (found[0].RenderDigest == to || oneRender(found)):
		for _, h := range found { // the same render applied twice (a rollback): the published one
			if h.RenderDigest == found[0].RenderDigest && h.Published != nil {
				return h, nil
			}
		}
		return found[0], nil
	case len(found) > 1:
		return nil, fmt.Errorf("%q names %d renders of %s/%s's history: give a render digest", to, len(found), mi.Namespace, mi.Name)
	}
	var known []string
	for _, h := range mi.Status.History {
		known = append(known, shortSHA(h.Revision)+" "+h.RenderDigest)
	}
	return nil, fmt.Errorf("%q is no render of %s/%s's history (status.history: %s)", to, mi.Namespace, mi.Name, strings.Join(known, ", "))
}

package report

import (
	"reflect"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// Event actions (events.k8s.io/v1 `action`: what cairn did, or failed to do).
const (
	eventActionSync       = "Sync"
	eventActionRemove     = "Remove"
	eventActionDriftCheck = "DriftCheck"
	eventActionHold       = "Hold"
)

// RevisionAnnotation is set on cairn's events to the revision the transition happened at.
const RevisionAnnotation = "cairn.dev/revision"

// eventNoteLimit is the longest note the API server accepts on an events.k8s.io/v1 Event;
// a longer one would be refused and the event lost.
const eventNoteLimit = 1024

// conditionEvent is the event a change of a condition calls for.
type conditionEvent struct {
	eventType, reason, action, note, revision string
}

// RecordTransition records an event with rec on after when its Ready condition
// changed from before's (either may be nil): another status or reason, or the same
// verdict at a newly applied revision (so each commit applied is one event, and a
// retry that changes nothing is none). The reason is the condition's and the note
// its message, the text already written to the status, so an event says no more than
// the status does (Secret values are masked there). Warning when Ready is False,
// Normal otherwise. A nil rec records nothing.
func RecordTransition(rec events.EventRecorder, before, after client.Object) {
	if ev, ok := transitionEvent(before, after); ok {
		record(rec, after, ev)
	}
}

// RecordRemoval records with rec that live, an instance that left Git, was removed
// at revision (res is its outcome; its CR is gone, the event stays, regarding it, for
// the events' TTL). An instance that was not deleted is no event: its transition
// says what happened. A nil rec records nothing.
func RecordRemoval(rec events.EventRecorder, live *cairnv1.ModuleInstance, res outcome.InstanceResult, revision string) {
	if res.Action == outcome.ActionDeleted {
		record(rec, live, conditionEvent{eventType: corev1.EventTypeNormal, reason: res.Reason, action: eventActionRemove,
			note: res.Message, revision: revision})
	}
}

// RecordDrift records with rec an event for a drift check of an instance (before
// and after it): each correction (DriftCorrected, objects re-applied: Normal; the
// broadcaster counts repeats as a series), and a new verdict of drift left in place
// (DriftDetected under spec.drift: Warn: a Warning). A drift that is gone is no
// event. A nil rec records nothing.
func RecordDrift(rec events.EventRecorder, before, after *cairnv1.ModuleInstance) {
	now := conditions.Get(after, cairnv1.DriftedCondition)
	if now == nil {
		return
	}
	was := conditions.Get(before, cairnv1.DriftedCondition)
	if now.Status == metav1.ConditionTrue && was != nil && was.Reason == now.Reason && was.Message == now.Message {
		return
	}
	ev := conditionEvent{eventType: corev1.EventTypeNormal, reason: now.Reason, action: eventActionDriftCheck, note: now.Message,
		revision: after.Status.LastAppliedRevision}
	if now.Status == metav1.ConditionTrue {
		ev.eventType = corev1.EventTypeWarning
	}
	record(rec, after, ev)
}

// RecordHold records with rec that mi was held (reason Held, with the Held
// condition's message: the render, who asked, since when) or released (reason
// Released, note saying by whom or why). A nil rec records nothing.
func RecordHold(rec events.EventRecorder, mi *cairnv1.ModuleInstance, reason, note string) {
	record(rec, mi, conditionEvent{eventType: corev1.EventTypeNormal, reason: reason, action: eventActionHold, note: note,
		revision: mi.Status.LastAppliedRevision})
}

// record records ev with rec on the object it regards, annotated with its revision
// when rec can; nothing when rec is nil.
func record(rec events.EventRecorder, regarding client.Object, ev conditionEvent) {
	if rec == nil {
		return
	}
	note := truncateNote(ev.note)
	if ar, ok := rec.(events.AnnotatedEventRecorder); ok && ev.revision != "" {
		ar.AnnotatedEventf(regarding, nil, map[string]string{RevisionAnnotation: ev.revision}, ev.eventType, ev.reason, ev.action, "%s", note)
		return
	}
	rec.Eventf(regarding, nil, ev.eventType, ev.reason, ev.action, "%s", note)
}

// transitionEvent compares the Ready conditions of before and after (either may be nil).
func transitionEvent(before, after client.Object) (conditionEvent, bool) {
	now := readyCondition(after)
	if now == nil || now.Reason == "" {
		return conditionEvent{}, false
	}
	was := readyCondition(before)
	if was != nil && was.Status == now.Status && was.Reason == now.Reason && appliedRevision(before) == appliedRevision(after) {
		return conditionEvent{}, false
	}
	ev := conditionEvent{eventType: corev1.EventTypeNormal, reason: now.Reason, action: eventActionSync, note: now.Message,
		revision: attemptedRevision(after)}
	if now.Status == metav1.ConditionFalse {
		ev.eventType = corev1.EventTypeWarning
	}
	return ev, true
}

func readyCondition(obj client.Object) *metav1.Condition {
	g, ok := obj.(conditions.Getter)
	if !ok || isNil(obj) {
		return nil
	}
	return conditions.Get(g, "Ready")
}

func isNil(obj client.Object) bool {
	v := reflect.ValueOf(obj)
	return obj == nil || (v.Kind() == reflect.Pointer && v.IsNil())
}

// appliedRevision is the revision obj records as applied.
func appliedRevision(obj client.Object) string {
	switch o := obj.(type) {
	case *cairnv1.ModuleInstance:
		if o != nil {
			return o.Status.LastAppliedRevision
		}
	case *cairnv1.Platform:
		if o != nil {
			return o.Status.LastSyncedRevision
		}
	}
	return "" // a Registry: only a new verdict is an event, not each revision it is declared at
}

// attemptedRevision is the revision obj's status was last written for.
func attemptedRevision(obj client.Object) string {
	switch o := obj.(type) {
	case *cairnv1.ModuleInstance:
		return o.Status.LastAttemptedRevision
	case *cairnv1.Platform:
		return o.Status.LastAttemptedRevision
	case *cairnv1.Registry:
		return o.Status.LastAppliedRevision
	}
	return ""
}

// truncateNote cuts a note to eventNoteLimit bytes on a rune boundary.
func truncateNote(s string) string {
	if len(s) <= eventNoteLimit {
		return s
	}
	const more = "…"
	cut := eventNoteLimit - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

package report

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// instanceAt is a ModuleInstance whose Ready condition is status/reason/message, last
// applied at applied.
func instanceAt(status, reason, message, applied string) *cairnv1.ModuleInstance {
	mi := &cairnv1.ModuleInstance{}
	mi.Name, mi.Namespace = "app", "team"
	mi.Status.LastAppliedRevision, mi.Status.LastAttemptedRevision = applied, applied
	switch status {
	case "True":
		conditions.MarkTrue(mi, "Ready", reason, "%s", message)
	case "False":
		conditions.MarkFalse(mi, "Ready", reason, "%s", message)
	case "Unknown":
		conditions.MarkUnknown(mi, "Ready", reason, "%s", message)
	}
	return mi
}

func TestTransitionEvent(t *testing.T) {
	ready := instanceAt("True", cairnv1.ReasonSucceeded, "4 objects applied", "sha1")
	for _, tc := range []struct {
		name          string
		before, after client.Object
		want          *conditionEvent
	}{
		{name: "first verdict", before: instanceAt("", "", "", ""), after: ready,
			want: &conditionEvent{eventType: "Normal", reason: "Succeeded", action: "Sync", note: "4 objects applied", revision: "sha1"}},
		{name: "no CR before", before: (*cairnv1.ModuleInstance)(nil), after: ready,
			want: &conditionEvent{eventType: "Normal", reason: "Succeeded", action: "Sync", note: "4 objects applied", revision: "sha1"}},
		{name: "ready to failed is a warning", before: ready,
			after: instanceAt("False", cairnv1.ReasonRenderFailed, "app.cue:3: boom", "sha1"),
			want:  &conditionEvent{eventType: "Warning", reason: "RenderFailed", action: "Sync", note: "app.cue:3: boom", revision: "sha1"}},
		{name: "progressing is normal", before: ready,
			after: instanceAt("Unknown", cairnv1.ReasonProgressing, "waiting", "sha1"),
			want:  &conditionEvent{eventType: "Normal", reason: "Progressing", action: "Sync", note: "waiting", revision: "sha1"}},
		{name: "a new revision applied", before: ready,
			after: instanceAt("True", cairnv1.ReasonSucceeded, "5 objects applied", "sha2"),
			want:  &conditionEvent{eventType: "Normal", reason: "Succeeded", action: "Sync", note: "5 objects applied", revision: "sha2"}},
		{name: "same verdict, same revision: none", before: ready,
			after: instanceAt("True", cairnv1.ReasonSucceeded, "4 objects applied (again)", "sha1")},
		{name: "the same failure again: none",
			before: instanceAt("False", cairnv1.ReasonApplyFailed, "conflict", "sha1"),
			after:  instanceAt("False", cairnv1.ReasonApplyFailed, "conflict, again", "sha1")},
		{name: "no Ready condition: none", before: ready, after: instanceAt("", "", "", "sha1")},
		{name: "a Registry is not an event at each revision",
			before: registryReady("sha1"), after: registryReady("sha2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := transitionEvent(tc.before, tc.after)
			if tc.want == nil {
				g.Expect(ok).To(BeFalse(), "%+v", got)
				return
			}
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(Equal(*tc.want))
		})
	}
}

func registryReady(sha string) *cairnv1.Registry {
	r := &cairnv1.Registry{}
	r.Name = "internal"
	r.Status.LastAppliedRevision = sha
	conditions.MarkTrue(r, "Ready", cairnv1.ReasonSucceeded, "declared at %s", sha)
	return r
}

func TestRecordTransitionRecordsAnnotatedEvent(t *testing.T) {
	g := NewWithT(t)
	rec := events.NewFakeRecorder(10)
	rec.Verbose = true
	before := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha1")
	after := instanceAt("False", cairnv1.ReasonValuesFromFailed, strings.Repeat("é", 600), "sha2")
	RecordTransition(rec, before, after)
	RecordTransition(rec, after, after) // no change: no event
	RecordRemoval(rec, after, outcome.InstanceResult{Action: outcome.ActionDeleted, Reason: "Removed", Message: "removed from Git: 2 objects deleted"}, "sha3")
	RecordRemoval(rec, after, outcome.InstanceResult{Action: outcome.ActionFailed, Reason: cairnv1.ReasonPruneGuard}, "sha3") // the transition says it

	g.Expect(rec.Events).To(HaveLen(2))
	first := <-rec.Events
	g.Expect(first).To(HavePrefix(corev1.EventTypeWarning + " ValuesFromFailed Sync "))
	g.Expect(first).To(ContainSubstring("map[" + RevisionAnnotation + ":sha2]"))
	g.Expect(<-rec.Events).To(HavePrefix("Normal Removed Remove removed from Git: 2 objects deleted"))

	RecordTransition(nil, before, after) // no recorder: nothing, no panic
}

func TestTruncateNote(t *testing.T) {
	g := NewWithT(t)
	g.Expect(truncateNote("short")).To(Equal("short"))
	long := truncateNote(strings.Repeat("é", 600)) // 1200 bytes
	g.Expect(len(long)).To(BeNumerically("<=", eventNoteLimit))
	g.Expect(utf8.ValidString(long)).To(BeTrue())
	g.Expect(long).To(HaveSuffix("…"))
}

func TestRecordDrift(t *testing.T) {
	drifted := func(status, reason, msg string) *cairnv1.ModuleInstance {
		mi := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha1")
		if status == "True" {
			conditions.MarkTrue(mi, cairnv1.DriftedCondition, reason, "%s", msg)
		} else if status == "False" {
			conditions.MarkFalse(mi, cairnv1.DriftedCondition, reason, "%s", msg)
		}
		return mi
	}
	for _, tc := range []struct {
		name          string
		before, after *cairnv1.ModuleInstance
		want          string
	}{
		{name: "corrected", before: drifted("", "", ""), after: drifted("False", "DriftCorrected", "re-applied 1 drifted object(s): ConfigMap/team/x"),
			want: "Normal DriftCorrected DriftCheck re-applied 1 drifted object(s): ConfigMap/team/x"},
		{name: "detected under Warn", before: drifted("", "", ""), after: drifted("True", "DriftDetected", "1 object(s) differ from Git: ConfigMap/team/x"),
			want: "Warning DriftDetected DriftCheck 1 object(s) differ from Git: ConfigMap/team/x"},
		{name: "corrected again", before: drifted("False", "DriftCorrected", "re-applied 1"), after: drifted("False", "DriftCorrected", "re-applied 1"),
			want: "Normal DriftCorrected DriftCheck re-applied 1"},
		{name: "the same drift left again", before: drifted("True", "DriftDetected", "1 object(s) differ"), after: drifted("True", "DriftDetected", "1 object(s) differ")},
		{name: "no drift", before: drifted("True", "DriftDetected", "1 object(s) differ"), after: drifted("", "", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec := events.NewFakeRecorder(2)
			rec.Verbose = true
			RecordDrift(rec, tc.before, tc.after)
			if tc.want == "" {
				g.Expect(rec.Events).To(BeEmpty())
				return
			}
			g.Expect(rec.Events).To(Receive(HavePrefix(tc.want)))
		})
	}
}

package main

import (
	"bytes"
	"testing"

	"github.com/fluxcd/pkg/runtime/conditions"
	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler"
)

func TestStatusMarksSuspendedInstances(t *testing.T) {
	g := NewWithT(t)
	paused, running := cairnv1.ModuleInstance{}, cairnv1.ModuleInstance{}
	paused.Namespace, paused.Name, paused.Spec.Suspend = "team-a", "paused", true
	conditions.MarkUnknown(&paused, "Ready", cairnv1.ReasonSuspended, "suspended")
	running.Namespace, running.Name = "team-a", "running"
	conditions.MarkTrue(&running, "Ready", cairnv1.ReasonSucceeded, "ok")

	rows := statusRows([]cairnv1.ModuleInstance{paused, running})
	g.Expect(rows[0].Suspended).To(BeTrue())
	g.Expect(rows[0].Ready).To(Equal("Unknown"))
	g.Expect(rows[0].Reason).To(Equal(cairnv1.ReasonSuspended))
	g.Expect(rows[1].Suspended).To(BeFalse())
	var out bytes.Buffer
	g.Expect(printStatusTable(&out, rows)).To(Succeed())
	g.Expect(out.String()).To(MatchRegexp(`(?m)^NAMESPACE .* SUSPENDED +MESSAGE$`))
	g.Expect(out.String()).To(MatchRegexp(`(?m)^team-a +paused +Unknown +Suspended .* SUSPENDED +suspended$`))
	g.Expect(out.String()).To(MatchRegexp(`(?m)^team-a +running +True +Succeeded .* - +ok$`))
}

func TestSyncOutputShowsWarnings(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	printSyncResult(&out, &reconciler.SyncResult{Revision: "abc", Instances: []reconciler.InstanceResult{{
		Namespace: "team-a", Name: "web", Action: "Updated", Ready: true, Message: "1 objects applied",
		Warnings: []string{"module x requires catalog y v0.2.0, newer than the pinned v0.1.0; rendering with v0.1.0"},
	}}})
	g.Expect(out.String()).To(MatchRegexp(`(?m)^ +warning: module x requires catalog y v0.2.0, newer than the pinned v0.1.0`))
}

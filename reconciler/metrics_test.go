package reconciler

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

func TestMetricsReporterCountsOutcomes(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetricsReporter(reg)
	g.Expect(err).NotTo(HaveOccurred())
	a, b := InstanceKey{"team", "a"}, InstanceKey{"team", "b"}
	m.SyncStarted("sha", []InstanceKey{a, b})
	ra := InstanceResult{Action: outcome.ActionCreated, Reason: "Succeeded", Ready: true, Applied: 4, Created: 3, Unchanged: 2, Duration: 2 * time.Second}
	rb := InstanceResult{Action: outcome.ActionFailed, Reason: "RenderFailed"}
	m.InstanceFinished("sha", a, ra)
	m.InstanceFinished("sha", b, rb)
	m.SyncFinished("sha", &SyncResult{Revision: "sha", Instances: []InstanceResult{ra, rb,
		{Action: outcome.ActionProgressing}, {Action: outcome.ActionDeleted}}})

	g.Expect(testutil.ToFloat64(m.results.WithLabelValues("Created", "Succeeded"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.results.WithLabelValues("Failed", "RenderFailed"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.objects.WithLabelValues("created"))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(m.objects.WithLabelValues("configured"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.objects.WithLabelValues("unchanged"))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("ready"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("failed"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("progressing"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1), "one sync observed, as failed")
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("other"))).To(Equal(0.0), "a deleted instance is in no state")
	g.Expect(testutil.CollectAndCount(m.reconcileDuration)).To(Equal(2), "the instance that ran, and the Platform")
	g.Expect(histogramSum(t, m.reconcileDuration.WithLabelValues("ModuleInstance", "Created"))).To(Equal(2.0))
	g.Expect(histogramCount(t, m.reconcileDuration.WithLabelValues("Platform", "failed"))).To(Equal(uint64(1)))

	_, err = NewMetricsReporter(reg)
	g.Expect(err).To(HaveOccurred(), "registered once")
}

func TestReportersSkipsNil(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Reporters(nil, nil, (*MetricsReporter)(nil))).To(BeNil())
	m, _ := NewMetricsReporter(prometheus.NewRegistry())
	r := Reporters(nil, m)
	r.SyncStarted("x", nil)
	r.SyncFinished("x", &SyncResult{})
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1))
}

func TestEngineReportsToItsMetrics(t *testing.T) {
	g := NewWithT(t)
	m := newMetrics()
	e := New(nil, nil, Options{Metrics: m})
	e.opts.Reporter.SyncStarted("x", nil)
	e.opts.Reporter.SyncFinished("x", &SyncResult{})
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1), "Options.Metrics is a Reporter too")
}

func TestObserveRender(t *testing.T) {
	local := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: cairnv1.ModuleSource{Local: &cairnv1.LocalModule{Path: "./m"}}}}
	cue := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: cairnv1.ModuleSource{CUE: &cairnv1.CUEModule{Path: "x@v0"}}}}
	chart := &cairnv1.ModuleInstance{Spec: cairnv1.ModuleInstanceSpec{Module: cairnv1.ModuleSource{Chart: &cairnv1.ChartSource{URL: "oci://r/c"}}}}
	for _, tc := range []struct {
		mi           *cairnv1.ModuleInstance
		cached       bool
		err          error
		typ, outcome string
	}{
		{mi: local, typ: "local", outcome: "rendered"},
		{mi: cue, cached: true, typ: "cue", outcome: "cached"},
		{mi: chart, err: errors.New("boom"), typ: "helm", outcome: "failed"},
	} {
		g := NewWithT(t)
		m := newMetrics()
		m.observeRender(tc.mi, tc.cached, tc.err, 250*time.Millisecond)
		g.Expect(histogramSum(t, m.renderDuration.WithLabelValues(tc.typ, tc.outcome))).To(Equal(0.25), tc.typ)
		g.Expect(testutil.CollectAndCount(m.renderDuration)).To(Equal(1))
	}
	(*MetricsReporter)(nil).observeRender(local, false, nil, time.Second) // no metrics: no panic
}

func TestObserveRevisionAndRefusals(t *testing.T) {
	g := NewWithT(t)
	m := newMetrics()
	m.observeRevision(Revision{SHA: "dir:x"}) // a directory: nothing fetched
	m.observeRevision(Revision{SHA: "abc", Fetch: 1500 * time.Millisecond})
	g.Expect(histogramCount(t, m.fetchDuration)).To(Equal(uint64(1)))
	g.Expect(histogramSum(t, m.fetchDuration)).To(Equal(1.5))

	s := &syncRun{e: &Engine{opts: Options{Metrics: m}}, runs: []*instanceRun{
		{pruneErr: newPruneGuard(nil, "").refuse(limitMaxPercent, "x")}, {},
		{pruneErr: refusal(limitEmptyRender, outcome.Failuref(outcome.Stalled, cairnv1.ReasonPruneGuard, "empty"))}},
		pruneErrs: []error{newPruneGuard(nil, "").refuse(limitMaxDeletions, "y")}}
	s.countRefusals()
	for limit, want := range map[string]float64{limitMaxPercent: 1, limitEmptyRender: 1, limitMaxDeletions: 1, limitHalfOfInstances: 0} {
		g.Expect(testutil.ToFloat64(m.pruneRefusals.WithLabelValues(limit))).To(Equal(want), limit)
	}
	s.readOnly = true // a plan's refusals are not counted
	s.countRefusals()
	g.Expect(testutil.ToFloat64(m.pruneRefusals.WithLabelValues(limitMaxPercent))).To(Equal(1.0))
}

func TestObservePushToReady(t *testing.T) {
	committed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rev := Revision{SHA: "sha2", Committed: committed}
	now := committed.Add(42 * time.Second)
	ready1 := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha1")
	ready2 := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha2")
	progressing2 := instanceAt("Unknown", cairnv1.ReasonProgressing, "waiting", "sha1")
	for _, tc := range []struct {
		name          string
		rev           Revision
		before, after client.Object
		want          uint64
	}{
		{name: "ready at the new revision", rev: rev, before: ready1, after: ready2, want: 1},
		{name: "ready after a health recheck", rev: rev, before: progressing2, after: ready2, want: 1},
		{name: "a new instance", rev: rev, before: (*cairnv1.ModuleInstance)(nil), after: ready2, want: 1},
		{name: "already ready at it", rev: rev, before: ready2, after: ready2},
		{name: "not ready", rev: rev, before: ready1, after: instanceAt("False", cairnv1.ReasonApplyFailed, "x", "sha1")},
		{name: "no commit time (a directory)", rev: Revision{SHA: "sha2"}, before: ready1, after: ready2},
		{name: "not an instance", rev: rev, before: &cairnv1.Platform{}, after: &cairnv1.Platform{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMetrics()
			m.observePushToReady(tc.rev, tc.before, tc.after, now)
			g.Expect(histogramCount(t, m.pushToReady)).To(Equal(tc.want))
			if tc.want == 1 {
				g.Expect(histogramSum(t, m.pushToReady)).To(Equal(42.0))
			}
		})
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	return histogramOf(t, o).GetSampleCount()
}

func histogramSum(t *testing.T, o prometheus.Observer) float64 {
	return histogramOf(t, o).GetSampleSum()
}

func histogramOf(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	if err := o.(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram()
}

package report

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
	ra := outcome.InstanceResult{Action: outcome.ActionCreated, Reason: "Succeeded", Ready: true, Applied: 4, Created: 3, Unchanged: 2, Duration: 2 * time.Second}
	rb := outcome.InstanceResult{Action: outcome.ActionFailed, Reason: "RenderFailed"}
	m.InstanceFinished("sha", a, ra)
	m.InstanceFinished("sha", b, rb)
	m.SyncFinished("sha", &outcome.SyncResult{Revision: "sha", Instances: []outcome.InstanceResult{ra, rb,
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

func TestObserveRender(t *testing.T) {
	for _, tc := range []struct {
		typ     string
		cached  bool
		err     error
		outcome string
	}{
		{typ: "local", outcome: "rendered"},
		{typ: "cue", cached: true, outcome: "cached"},
		{typ: "helm", err: errors.New("boom"), outcome: "failed"},
	} {
		g := NewWithT(t)
		m := newMetrics()
		m.ObserveRender(tc.typ, tc.cached, tc.err, 250*time.Millisecond)
		g.Expect(histogramSum(t, m.renderDuration.WithLabelValues(tc.typ, tc.outcome))).To(Equal(0.25), tc.typ)
		g.Expect(testutil.CollectAndCount(m.renderDuration)).To(Equal(1))
	}
	(*MetricsReporter)(nil).ObserveRender("local", false, nil, time.Second) // no metrics: no panic
}

func TestObserveFetchAndRefusals(t *testing.T) {
	g := NewWithT(t)
	m := newMetrics()
	m.ObserveFetch(0) // a directory: nothing fetched
	m.ObserveFetch(1500 * time.Millisecond)
	g.Expect(histogramCount(t, m.fetchDuration)).To(Equal(uint64(1)))
	g.Expect(histogramSum(t, m.fetchDuration)).To(Equal(1.5))

	m.CountPruneRefusal(LimitMaxPercent)
	for limit, want := range map[string]float64{LimitMaxPercent: 1, LimitEmptyRender: 0, LimitMaxDeletions: 0, LimitHalfOfInstances: 0} {
		g.Expect(testutil.ToFloat64(m.pruneRefusals.WithLabelValues(limit))).To(Equal(want), limit)
	}
	g.Expect(testutil.CollectAndCount(m.pruneRefusals)).To(Equal(4), "each limit is scraped from the start")
	var none *MetricsReporter // no metrics: no panic
	none.ObserveFetch(time.Second)
	none.CountPruneRefusal(LimitMaxPercent)
	none.ObservePushToReady("sha", time.Now(), nil, nil, time.Now())
}

func TestObservePushToReady(t *testing.T) {
	committed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := committed.Add(42 * time.Second)
	ready1 := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha1")
	ready2 := instanceAt("True", cairnv1.ReasonSucceeded, "ok", "sha2")
	progressing2 := instanceAt("Unknown", cairnv1.ReasonProgressing, "waiting", "sha1")
	for _, tc := range []struct {
		name          string
		committed     time.Time
		before, after client.Object
		want          uint64
	}{
		{name: "ready at the new revision", committed: committed, before: ready1, after: ready2, want: 1},
		{name: "ready after a health recheck", committed: committed, before: progressing2, after: ready2, want: 1},
		{name: "a new instance", committed: committed, before: (*cairnv1.ModuleInstance)(nil), after: ready2, want: 1},
		{name: "already ready at it", committed: committed, before: ready2, after: ready2},
		{name: "not ready", committed: committed, before: ready1, after: instanceAt("False", cairnv1.ReasonApplyFailed, "x", "sha1")},
		{name: "no commit time (a directory)", before: ready1, after: ready2},
		{name: "not an instance", committed: committed, before: &cairnv1.Platform{}, after: &cairnv1.Platform{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m := newMetrics()
			m.ObservePushToReady("sha2", tc.committed, tc.before, tc.after, now)
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

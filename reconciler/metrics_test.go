package reconciler

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsReporterCountsOutcomes(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetricsReporter(reg)
	g.Expect(err).NotTo(HaveOccurred())
	a, b := InstanceKey{"team", "a"}, InstanceKey{"team", "b"}
	m.SyncStarted("sha", []InstanceKey{a, b})
	ra := InstanceResult{Action: ActionCreated, Reason: "Succeeded", Ready: true, Applied: 4}
	rb := InstanceResult{Action: ActionFailed, Reason: "RenderFailed"}
	m.InstanceFinished("sha", a, ra)
	m.InstanceFinished("sha", b, rb)
	m.SyncFinished("sha", &SyncResult{Revision: "sha", Instances: []InstanceResult{ra, rb,
		{Action: ActionProgressing}, {Action: ActionDeleted}}})

	g.Expect(testutil.ToFloat64(m.results.WithLabelValues("Created", "Succeeded"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.results.WithLabelValues("Failed", "RenderFailed"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.objects.WithLabelValues("applied"))).To(Equal(4.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("ready"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("failed"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("progressing"))).To(Equal(1.0))
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1), "one sync observed, as failed")
	g.Expect(testutil.ToFloat64(m.instances.WithLabelValues("other"))).To(Equal(0.0), "a deleted instance is in no state")

	_, err = NewMetricsReporter(reg)
	g.Expect(err).To(HaveOccurred(), "registered once")
}

func TestReportersSkipsNil(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Reporters(nil, nil)).To(BeNil())
	m, _ := NewMetricsReporter(prometheus.NewRegistry())
	r := Reporters(nil, m)
	r.SyncStarted("x", nil)
	r.SyncFinished("x", &SyncResult{})
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1))
}

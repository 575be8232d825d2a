package report

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"cairn.dev/cairn/reconciler/outcome"
)

func TestReportersSkipsNil(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Reporters(nil, nil, (*MetricsReporter)(nil))).To(BeNil())
	m, _ := NewMetricsReporter(prometheus.NewRegistry())
	r := Reporters(nil, m)
	r.SyncStarted("x", nil)
	r.SyncFinished("x", &outcome.SyncResult{})
	g.Expect(testutil.CollectAndCount(m.syncDuration)).To(Equal(1))
}

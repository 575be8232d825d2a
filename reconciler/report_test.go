package reconciler

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
	"cairn.dev/cairn/reconciler/prune"
	"cairn.dev/cairn/reconciler/report"
)

func TestEngineReportsToItsMetrics(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	m, err := report.NewMetricsReporter(reg)
	g.Expect(err).NotTo(HaveOccurred())
	e := New(nil, nil, Options{Metrics: m})
	e.opts.Reporter.SyncStarted("x", nil)
	e.opts.Reporter.SyncFinished("x", &SyncResult{})
	g.Expect(testutil.GatherAndCount(reg, "cairn_sync_duration_seconds")).To(Equal(1), "Options.Metrics is a Reporter too")
}

// TestCountRefusals: a sync counts each prune refusal under its guard's limit,
// the sync-wide ones and each instance's; a plan counts none.
func TestCountRefusals(t *testing.T) {
	g := NewWithT(t)
	reg := prometheus.NewRegistry()
	m, err := report.NewMetricsReporter(reg)
	g.Expect(err).NotTo(HaveOccurred())
	s := &RevisionState{revisionInput: revisionInput{e: &Engine{opts: Options{Metrics: m}}}, runs: []*instanceState{
		{instanceVerdicts: instanceVerdicts{pruneErr: prune.NewGuard(nil, "").Refuse(prune.LimitMaxPercent, "x")}}, {},
		{instanceVerdicts: instanceVerdicts{pruneErr: prune.Refusal(prune.LimitEmptyRender, outcome.Failuref(outcome.Stalled, cairnv1.ReasonPruneGuard, "empty"))}}},
		verdicts: verdicts{pruneErrs: []error{prune.NewGuard(nil, "").Refuse(prune.LimitMaxDeletions, "y")}}}
	s.countRefusals()
	const want = `# HELP cairn_prune_refusals_total Prunes the guards refused, by limit (maxDeletions, halfOfInstances, maxPercent, emptyRender).
# TYPE cairn_prune_refusals_total counter
cairn_prune_refusals_total{limit="emptyRender"} 1
cairn_prune_refusals_total{limit="halfOfInstances"} 0
cairn_prune_refusals_total{limit="maxDeletions"} 1
cairn_prune_refusals_total{limit="maxPercent"} 1
`
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(want), "cairn_prune_refusals_total")).To(Succeed())
	s.readOnly = true // a plan's refusals are not counted
	s.countRefusals()
	g.Expect(testutil.GatherAndCompare(reg, strings.NewReader(want), "cairn_prune_refusals_total")).To(Succeed())
	(&RevisionState{revisionInput: revisionInput{e: &Engine{}}, verdicts: verdicts{pruneErrs: s.pruneErrs}}).countRefusals() // no metrics: no panic
}

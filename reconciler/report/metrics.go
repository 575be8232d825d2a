package report

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"cairn.dev/cairn/reconciler/outcome"
)

// The prune guards, as cairn_prune_refusals_total names them in its limit label.
const (
	LimitMaxDeletions    = "maxDeletions"
	LimitHalfOfInstances = "halfOfInstances"
	LimitMaxPercent      = "maxPercent"
	LimitEmptyRender     = "emptyRender"
)

// MetricsReporter keeps cairn's Prometheus metrics: how long syncs and reconciles take
// and how they end, what happened to each instance, the objects applied and pruned,
// how many instances are in each state, the time from a commit to its instances being
// Ready, render and Git fetch durations, and prune refusals. It is a Reporter; set it
// as reconciler.Options.Metrics (which also reports to it) to get the engine's own
// observations.
// Labels carry kinds, actions and reasons only, never names of objects or values.
type MetricsReporter struct {
	syncDuration      *prometheus.HistogramVec
	reconcileDuration *prometheus.HistogramVec
	results           *prometheus.CounterVec
	objects           *prometheus.CounterVec
	instances         *prometheus.GaugeVec
	pushToReady       prometheus.Histogram
	renderDuration    *prometheus.HistogramVec
	pruneRefusals     *prometheus.CounterVec
	fetchDuration     prometheus.Histogram

	mu      sync.Mutex
	started map[string]time.Time
}

// NewMetricsReporter registers cairn's metrics with reg.
func NewMetricsReporter(reg prometheus.Registerer) (*MetricsReporter, error) {
	m := newMetrics()
	for _, c := range []prometheus.Collector{m.syncDuration, m.reconcileDuration, m.results, m.objects, m.instances,
		m.pushToReady, m.renderDuration, m.pruneRefusals, m.fetchDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func newMetrics() *MetricsReporter {
	m := newCollectors()
	for _, limit := range []string{LimitMaxDeletions, LimitHalfOfInstances, LimitMaxPercent, LimitEmptyRender} {
		m.pruneRefusals.WithLabelValues(limit) // each series is scraped from the start, at 0
	}
	return m
}

func newCollectors() *MetricsReporter {
	seconds := func(name, help string, start float64, n int) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(start, 2, n)}
	}
	return &MetricsReporter{
		syncDuration: prometheus.NewHistogramVec(seconds("cairn_sync_duration_seconds",
			"Duration of a sync of one revision, by result (succeeded, failed, interrupted).", 0.05, 14), []string{"result"}),
		reconcileDuration: prometheus.NewHistogramVec(seconds("cairn_reconcile_duration_seconds",
			"Duration of a reconcile, by kind (ModuleInstance: mirror, apply, prune, health wait and status of one instance, "+
				"or its removal; Platform: the sync of a revision) and result (the instance's action, or the sync's result).",
			0.01, 16), []string{"kind", "result"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_instance_results_total", Help: "Outcomes of instances in syncs, by action and reason.",
		}, []string{"action", "reason"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_objects_total", Help: "Objects handled by syncs, by action (created, configured, unchanged, pruned).",
		}, []string{"action"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cairn_instances", Help: "Instances after the last sync, by state (ready, failed, progressing, other).",
		}, []string{"state"}),
		pushToReady: prometheus.NewHistogram(seconds("cairn_push_to_ready_seconds",
			"Time from a commit (its committer time) to an instance it changed being Ready at it.", 0.5, 16)),
		renderDuration: prometheus.NewHistogramVec(seconds("cairn_render_duration_seconds",
			"Duration of an instance's render, by module type (cue, local, helm) and result (rendered, cached, failed).",
			0.005, 16), []string{"type", "result"}),
		pruneRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_prune_refusals_total",
			Help: "Prunes the guards refused, by limit (maxDeletions, halfOfInstances, maxPercent, emptyRender).",
		}, []string{"limit"}),
		fetchDuration: prometheus.NewHistogram(seconds("cairn_git_fetch_duration_seconds",
			"Duration of reading a revision from Git (fetch, tree, commit, diff), for the revisions synced.", 0.01, 14)),
		started: map[string]time.Time{},
	}
}

// SyncStarted notes when the sync of revision began.
func (m *MetricsReporter) SyncStarted(revision string, _ []InstanceKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started[revision] = time.Now()
}

// InstanceFinished counts the instance's outcome and the objects it changed, and
// observes how long its reconcile took.
func (m *MetricsReporter) InstanceFinished(_ string, _ InstanceKey, res outcome.InstanceResult) {
	m.results.WithLabelValues(string(res.Action), res.Reason).Inc()
	m.objects.WithLabelValues("created").Add(float64(res.Created))
	m.objects.WithLabelValues("configured").Add(float64(res.Applied - res.Created))
	m.objects.WithLabelValues("unchanged").Add(float64(res.Unchanged))
	m.objects.WithLabelValues("pruned").Add(float64(res.Pruned))
	if res.Duration > 0 {
		m.reconcileDuration.WithLabelValues("ModuleInstance", string(res.Action)).Observe(res.Duration.Seconds())
	}
}

// SyncFinished records the sync's duration and the instances by state.
func (m *MetricsReporter) SyncFinished(revision string, res *outcome.SyncResult) {
	m.mu.Lock()
	began, ok := m.started[revision]
	delete(m.started, revision)
	m.mu.Unlock()
	if ok {
		d := time.Since(began).Seconds()
		m.syncDuration.WithLabelValues(syncOutcome(res)).Observe(d)
		m.reconcileDuration.WithLabelValues("Platform", syncOutcome(res)).Observe(d)
	}
	counts := map[string]int{"ready": 0, "failed": 0, "progressing": 0, "other": 0}
	for _, i := range res.Instances {
		switch {
		case i.Action == outcome.ActionDeleted:
		case i.Ready:
			counts["ready"]++
		case i.Action == outcome.ActionFailed:
			counts["failed"]++
		case i.Action == outcome.ActionProgressing:
			counts["progressing"]++
		default:
			counts["other"]++
		}
	}
	for state, n := range counts {
		m.instances.WithLabelValues(state).Set(float64(n))
	}
}

func syncOutcome(res *outcome.SyncResult) string {
	switch {
	case res.Interrupted:
		return "interrupted"
	case res.Failed():
		return "failed"
	}
	return "succeeded"
}

package reconciler

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsReporter is a Reporter that keeps cairn's Prometheus metrics: how long syncs
// take and how they end, what happened to each instance, the objects applied and
// pruned, and how many instances are in each state. Labels carry kinds, actions and
// reasons only, never names of objects or values.
type MetricsReporter struct {
	syncDuration *prometheus.HistogramVec
	results      *prometheus.CounterVec
	objects      *prometheus.CounterVec
	instances    *prometheus.GaugeVec

	mu      sync.Mutex
	started map[string]time.Time
}

// NewMetricsReporter registers cairn's metrics with reg.
func NewMetricsReporter(reg prometheus.Registerer) (*MetricsReporter, error) {
	m := &MetricsReporter{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cairn_sync_duration_seconds", Help: "Duration of a sync of one revision, by result (succeeded, failed, interrupted).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"result"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_instance_results_total", Help: "Outcomes of instances in syncs, by action and reason.",
		}, []string{"action", "reason"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_objects_total", Help: "Objects changed by syncs, by action (applied, pruned).",
		}, []string{"action"}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cairn_instances", Help: "Instances after the last sync, by state (ready, failed, progressing, other).",
		}, []string{"state"}),
		started: map[string]time.Time{},
	}
	for _, c := range []prometheus.Collector{m.syncDuration, m.results, m.objects, m.instances} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SyncStarted notes when the sync of revision began.
func (m *MetricsReporter) SyncStarted(revision string, _ []InstanceKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started[revision] = time.Now()
}

// InstanceFinished counts the instance's outcome and the objects it changed.
func (m *MetricsReporter) InstanceFinished(_ string, _ InstanceKey, res InstanceResult) {
	m.results.WithLabelValues(string(res.Action), res.Reason).Inc()
	m.objects.WithLabelValues("applied").Add(float64(res.Applied))
	m.objects.WithLabelValues("pruned").Add(float64(res.Pruned))
}

// SyncFinished records the sync's duration and the instances by state.
func (m *MetricsReporter) SyncFinished(revision string, res *SyncResult) {
	m.mu.Lock()
	began, ok := m.started[revision]
	delete(m.started, revision)
	m.mu.Unlock()
	if ok {
		m.syncDuration.WithLabelValues(syncOutcome(res)).Observe(time.Since(began).Seconds())
	}
	counts := map[string]int{"ready": 0, "failed": 0, "progressing": 0, "other": 0}
	for _, i := range res.Instances {
		switch {
		case i.Action == ActionDeleted:
		case i.Ready:
			counts["ready"]++
		case i.Action == ActionFailed:
			counts["failed"]++
		case i.Action == ActionProgressing:
			counts["progressing"]++
		default:
			counts["other"]++
		}
	}
	for state, n := range counts {
		m.instances.WithLabelValues(state).Set(float64(n))
	}
}

func syncOutcome(res *SyncResult) string {
	switch {
	case res.Interrupted:
		return "interrupted"
	case res.Failed():
		return "failed"
	}
	return "succeeded"
}

// Reporters tells every non-nil reporter of rs, in order; nil when there is none.
func Reporters(rs ...Reporter) Reporter {
	var out multiReporter
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

type multiReporter []Reporter

func (m multiReporter) SyncStarted(rev string, instances []InstanceKey) {
	for _, r := range m {
		r.SyncStarted(rev, instances)
	}
}

func (m multiReporter) InstanceFinished(rev string, k InstanceKey, res InstanceResult) {
	for _, r := range m {
		r.InstanceFinished(rev, k, res)
	}
}

func (m multiReporter) SyncFinished(rev string, res *SyncResult) {
	for _, r := range m {
		r.SyncFinished(rev, res)
	}
}

package reconciler

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// The engine's own observations, each a no-op on a nil *MetricsReporter (no metrics).

// observeRender records one render of an instance.
func (m *MetricsReporter) observeRender(mi *cairnv1.ModuleInstance, cached bool, err error, d time.Duration) {
	if m == nil {
		return
	}
	result := "rendered"
	switch {
	case err != nil:
		result = "failed"
	case cached:
		result = "cached"
	}
	m.renderDuration.WithLabelValues(moduleType(mi), result).Observe(d.Seconds())
}

// moduleType is the label of an instance's kind of module.
func moduleType(mi *cairnv1.ModuleInstance) string {
	if k := moduleKindOf(mi); k != nil {
		return k.label()
	}
	return "other"
}

func (m *MetricsReporter) countPruneRefusal(limit string) {
	if m != nil {
		m.pruneRefusals.WithLabelValues(limit).Inc()
	}
}

// observeRevision records how long reading rev from Git took (nothing for a directory).
func (m *MetricsReporter) observeRevision(rev Revision) {
	if m != nil && rev.Fetch > 0 {
		m.fetchDuration.Observe(rev.Fetch.Seconds())
	}
}

// observePushToReady records the time from rev's commit to an instance being Ready
// at it, when after is an instance that became Ready at rev with this status write.
func (m *MetricsReporter) observePushToReady(rev Revision, before, after client.Object, now time.Time) {
	if m == nil || rev.Committed.IsZero() || readyAt(before, rev.SHA) || !readyAt(after, rev.SHA) {
		return
	}
	m.pushToReady.Observe(max(now.Sub(rev.Committed), 0).Seconds())
}

// readyAt reports whether obj is an instance Ready with sha applied.
func readyAt(obj client.Object, sha string) bool {
	mi, ok := obj.(*cairnv1.ModuleInstance)
	return ok && mi != nil && isReady(mi) && mi.Status.LastAppliedRevision == sha
}

// transition is what a status write of an instance's outcome reports: the event of
// its Ready transition and its push-to-Ready time.
func (s *syncRun) transition(before, after client.Object) {
	s.e.emitTransition(before, after)
	s.e.opts.Metrics.observePushToReady(s.rev, before, after, time.Now())
}

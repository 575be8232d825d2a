package report

import (
	"time"

	"github.com/fluxcd/pkg/runtime/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// The engine's own observations, each a no-op on a nil *MetricsReporter (no metrics).

// ObserveRender records one render of an instance whose module is of moduleType
// (cue, local, helm, timoni, kustomize, other): cached when the render cache had
// it, failed when err is set.
func (m *MetricsReporter) ObserveRender(moduleType string, cached bool, err error, d time.Duration) {
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
	m.renderDuration.WithLabelValues(moduleType, result).Observe(d.Seconds())
}

// CountPruneRefusal counts one prune the guard limit (LimitMaxDeletions...) refused.
func (m *MetricsReporter) CountPruneRefusal(limit string) {
	if m != nil {
		m.pruneRefusals.WithLabelValues(limit).Inc()
	}
}

// ObserveFetch records how long reading a revision from Git took (nothing for a
// directory, which is not fetched: d is zero).
func (m *MetricsReporter) ObserveFetch(d time.Duration) {
	if m != nil && d > 0 {
		m.fetchDuration.Observe(d.Seconds())
	}
}

// ObservePushToReady records the time from the commit sha, committed at committed,
// to an instance being Ready at it, when after is an instance that became Ready at
// sha with this status write (before is what the status was). A revision without a
// commit time (a directory) is not observed.
func (m *MetricsReporter) ObservePushToReady(sha string, committed time.Time, before, after client.Object, now time.Time) {
	if m == nil || committed.IsZero() || readyAt(before, sha) || !readyAt(after, sha) {
		return
	}
	m.pushToReady.Observe(max(now.Sub(committed), 0).Seconds())
}

// readyAt reports whether obj is an instance Ready with sha applied.
func readyAt(obj client.Object, sha string) bool {
	mi, ok := obj.(*cairnv1.ModuleInstance)
	return ok && mi != nil && conditions.IsTrue(mi, "Ready") && mi.Status.LastAppliedRevision == sha
}

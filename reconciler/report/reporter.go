package report

import "cairn.dev/cairn/reconciler/outcome"

// Reporter is told what a sync does, as it happens, so the outcome can be reported
// where people look (commit statuses on the forge). Calls come from several
// goroutines; implementations must not block (queue and return).
type Reporter interface {
	// SyncStarted is called once the instances a revision affects are known.
	SyncStarted(revision string, instances []InstanceKey)
	// InstanceFinished is called when an affected instance has its outcome.
	InstanceFinished(revision string, instance InstanceKey, res outcome.InstanceResult)
	// SyncFinished is called last, with the whole result.
	SyncFinished(revision string, res *outcome.SyncResult)
}

// InstanceKey names an instance.
type InstanceKey struct{ Namespace, Name string }

// String is the key as namespace/name.
func (k InstanceKey) String() string { return k.Namespace + "/" + k.Name }

// Nop is a Reporter that reports nothing.
type Nop struct{}

// SyncStarted does nothing.
func (Nop) SyncStarted(string, []InstanceKey) {}

// InstanceFinished does nothing.
func (Nop) InstanceFinished(string, InstanceKey, outcome.InstanceResult) {}

// SyncFinished does nothing.
func (Nop) SyncFinished(string, *outcome.SyncResult) {}

// Reporters tells every non-nil reporter of rs, in order; nil when there is none.
func Reporters(rs ...Reporter) Reporter {
	var out multiReporter
	for _, r := range rs {
		if r != nil && !isNilReporter(r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func isNilReporter(r Reporter) bool {
	m, ok := r.(*MetricsReporter)
	return ok && m == nil
}

type multiReporter []Reporter

func (m multiReporter) SyncStarted(rev string, instances []InstanceKey) {
	for _, r := range m {
		r.SyncStarted(rev, instances)
	}
}

func (m multiReporter) InstanceFinished(rev string, k InstanceKey, res outcome.InstanceResult) {
	for _, r := range m {
		r.InstanceFinished(rev, k, res)
	}
}

func (m multiReporter) SyncFinished(rev string, res *outcome.SyncResult) {
	for _, r := range m {
		r.SyncFinished(rev, res)
	}
}

package reconciler

import "slices"

// Reporter is told what a sync does, as it happens, so the outcome can be reported
// where people look (commit statuses on the forge). Calls come from several
// goroutines; implementations must not block (queue and return).
type Reporter interface {
	// SyncStarted is called once the instances a revision affects are known.
	SyncStarted(revision string, instances []InstanceKey)
	// InstanceFinished is called when an affected instance has its outcome.
	InstanceFinished(revision string, instance InstanceKey, res InstanceResult)
	// SyncFinished is called last, with the whole result.
	SyncFinished(revision string, res *SyncResult)
}

// InstanceKey names an instance.
type InstanceKey struct{ Namespace, Name string }

func (k InstanceKey) String() string { return k.Namespace + "/" + k.Name }

type nopReporter struct{}

func (nopReporter) SyncStarted(string, []InstanceKey)                    {}
func (nopReporter) InstanceFinished(string, InstanceKey, InstanceResult) {}
func (nopReporter) SyncFinished(string, *SyncResult)                     {}

// touched lists the instances this sync acts on: the affected and the removed ones.
func (s *syncRun) touched() []InstanceKey {
	var out []InstanceKey
	for _, r := range s.runs {
		if r.affected {
			out = append(out, InstanceKey{r.mi.Namespace, r.mi.Name})
		}
	}
	for _, live := range append(slices.Clone(s.removed), s.held...) {
		out = append(out, InstanceKey{live.Namespace, live.Name})
	}
	for _, inv := range s.set.Invalid {
		if ns, name := splitKey(inv.Object); inv.Kind == "ModuleInstance" && name != "" {
			out = append(out, InstanceKey{ns, name})
		}
	}
	return out
}

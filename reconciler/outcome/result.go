package outcome

import "time"

// SyncResult is the outcome of one sync: what it did to each instance it touched,
// or why the revision could not be used.
type SyncResult struct {
	Revision  string
	Instances []InstanceResult
	// Error is set when the revision could not be used at all (declarations).
	Error error
	// RetryAt is when a revision that could not be used is tried again.
	RetryAt time.Time `json:",omitempty"`
	// Interrupted says the sync was stopped (SIGTERM, a lost Lease) before it ended.
	Interrupted bool `json:",omitempty"`
	// Unrefreshed names the Registries of the sync's refresh (Revision.Refreshed)
	// whose new input could not be written into an instance that uses them: that
	// instance keeps its old input, so the next sync refreshes them again.
	Unrefreshed []string `json:",omitempty"`
}

// InstanceResult is what one sync did to one instance.
type InstanceResult struct {
	Namespace, Name string
	// Action is Created, Updated, Unchanged, Deleted, Skipped, Failed or Progressing
	// (applied, not yet Current when the sync stopped waiting; see reconciler.Options.HealthWait).
	Action Action
	// Retry says how a failure is retried: Transient, Waiting, Stalled or Progressing.
	Retry   Kind `json:",omitempty"`
	Ready   bool
	Reason  string
	Message string
	// Warnings are non-fatal findings, e.g. catalog skew under skewPolicy: Warn; a
	// ready instance also carries them at the end of its Ready message.
	Warnings []string `json:",omitempty"`
	// Applied counts objects created or configured; Pruned counts deletions.
	Applied, Unchanged, Pruned int
	// Created counts the objects of Applied that were created.
	Created int `json:",omitempty"`
	// Duration is how long the instance's reconcile took (zero: it did not run).
	Duration time.Duration `json:"-"`
	// NextRetryAt is when a failed instance is retried at the same revision.
	NextRetryAt *time.Time `json:",omitempty"`
}

// Failed reports whether any instance failed or the revision was unusable.
func (r *SyncResult) Failed() bool {
	if r.Error != nil {
		return true
	}
	for _, i := range r.Instances {
		if i.Action == ActionFailed {
			return true
		}
	}
	return false
}

// NextRetry is the earliest time at which an instance that failed in this sync
// (or earlier) is due for a retry of the same revision; zero when none is. A
// revision that could not be used at all is retried after the stalled recheck. A
// sync loop wakes up then even when the branch has not moved.
func (r *SyncResult) NextRetry() time.Time {
	if r.Error != nil {
		return r.RetryAt
	}
	var next time.Time
	for _, i := range r.Instances {
		if (i.Action == ActionFailed || i.Action == ActionProgressing) && i.NextRetryAt != nil && (next.IsZero() || i.NextRetryAt.Before(next)) {
			next = *i.NextRetryAt
		}
	}
	return next
}

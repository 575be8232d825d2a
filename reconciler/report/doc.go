// Package report owns telling the outside what a sync did: the Reporter a sync
// calls as it goes (SyncStarted, InstanceFinished, SyncFinished), the commit statuses
// it posts on the forge (ForgeReporter), cairn's Prometheus metrics (MetricsReporter,
// with the engine's own observations of renders, fetches, prune refusals and
// push-to-Ready times), and the Kubernetes Events of each Ready transition, removal
// and drift check (RecordTransition, RecordRemoval, RecordDrift; EventRecorder for a
// process that exits when its sync is done). It speaks the typed outcome of
// reconciler/outcome and sits below the engine, which calls it; see
// docs/architecture.md.
package report

package main

import (
	"time"

	"cairn.dev/cairn/reconciler"
	"cairn.dev/cairn/reconciler/report"
)

// eventFlushWait bounds how long `cairn sync` waits at exit for its events to be written.
const eventFlushWait = 5 * time.Second

// newEventRecorder returns the recorder of cairn's events for a CLI sync; Flush it
// before the process exits.
func newEventRecorder(kube *kubeFlags) (*report.EventRecorder, error) {
	cfg, err := kube.restConfig()
	if err != nil {
		return nil, err
	}
	return report.NewEventRecorder(cfg, reconciler.Scheme)
}

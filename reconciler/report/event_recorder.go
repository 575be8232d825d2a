package report

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
)

// EventReportingController is the reportingController of cairn's events.
const EventReportingController = "cairn"

// EventRecorder records events.k8s.io/v1 Events for a process that exits when its work
// is done (`cairn sync`): client-go's broadcaster writes events in the background, and
// Flush waits, bounded, until those recorded so far are written. A controller uses its
// manager's recorder instead.
type EventRecorder struct {
	recorder    events.EventRecorderLogger
	broadcaster events.EventBroadcaster
	cancel      context.CancelFunc
	pending     atomic.Int64 // events recorded, not yet handed to the API server
}

// NewEventRecorder starts a broadcaster that writes cairn's events with cfg; scheme
// (reconciler.Scheme) names the kinds of the objects the events regard.
func NewEventRecorder(cfg *rest.Config, scheme *runtime.Scheme) (*EventRecorder, error) {
	c, err := eventsv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the events client: %w", err)
	}
	return newEventRecorder(&events.EventSinkImpl{Interface: c}, scheme)
}

func newEventRecorder(sink events.EventSink, scheme *runtime.Scheme) (*EventRecorder, error) {
	r := &EventRecorder{}
	r.broadcaster = events.NewBroadcaster(&countingSink{EventSink: sink, pending: &r.pending})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("failed to start recording events: %w", err)
	}
	r.cancel = cancel
	r.recorder = r.broadcaster.NewRecorder(scheme, EventReportingController)
	return r, nil
}

// Eventf records an event (see events.EventRecorder).
func (r *EventRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.pending.Add(1)
	r.recorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// AnnotatedEventf records an event with annotations (see events.AnnotatedEventRecorder).
func (r *EventRecorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string,
	eventtype, reason, action, note string, args ...any) {
	r.pending.Add(1)
	r.recorder.(events.AnnotatedEventRecorder).AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

// Flush waits until the events recorded so far were written (or refused), at most
// timeout, then stops the broadcaster; later events are dropped.
func (r *EventRecorder) Flush(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for r.pending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.broadcaster.Shutdown()
	r.cancel()
}

// countingSink counts down pending as each write of an event returns.
type countingSink struct {
	events.EventSink
	pending *atomic.Int64
}

func (s *countingSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.done()
	return s.EventSink.Create(ctx, ev)
}

func (s *countingSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.done()
	return s.EventSink.Patch(ctx, ev, data)
}

// done counts one write down, never below zero (a series refresh writes an event
// that was counted already).
func (s *countingSink) done() {
	for {
		n := s.pending.Load()
		if n <= 0 || s.pending.CompareAndSwap(n, n-1) {
			return
		}
	}
}

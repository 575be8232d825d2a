package report

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
)

// slowSink is an API server that takes delay to write each event.
type slowSink struct {
	delay time.Duration
	mu    sync.Mutex
	notes []string
}

func (s *slowSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, ev.Note)
	return ev, nil
}

func (s *slowSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return ev, nil
}

func (s *slowSink) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return ev, nil
}

func (s *slowSink) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

func TestEventRecorderFlushWaitsForTheWrites(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		want    int
	}{
		{name: "within the bound, every event is written", timeout: 5 * time.Second, want: 2},
		{name: "the wait is bounded", timeout: 50 * time.Millisecond, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sink := &slowSink{delay: 300 * time.Millisecond}
			r, err := newEventRecorder(sink, scheme(g))
			g.Expect(err).NotTo(HaveOccurred())
			mi := &cairnv1.ModuleInstance{}
			mi.Name, mi.Namespace, mi.UID = "app", "team", "uid-1"
			r.Eventf(mi, nil, "Normal", "Succeeded", "Sync", "applied %d", 1)
			r.AnnotatedEventf(mi, nil, map[string]string{RevisionAnnotation: "sha"}, "Warning", "ApplyFailed", "Sync", "failed")
			began := time.Now()
			r.Flush(tc.timeout)
			g.Expect(time.Since(began)).To(BeNumerically("<", tc.timeout+time.Second))
			g.Expect(sink.written()).To(HaveLen(tc.want))
			r.Eventf(mi, nil, "Normal", "Succeeded", "Sync", "after the flush") // dropped, no panic
		})
	}
}

// scheme knows cairn's kinds, as reconciler.Scheme does.
func scheme(g Gomega) *runtime.Scheme {
	s := runtime.NewScheme()
	g.Expect(cairnv1.AddToScheme(s)).To(Succeed())
	return s
}

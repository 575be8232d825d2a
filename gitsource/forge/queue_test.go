package forge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"cairn.dev/cairn/gitsource/forge"
	"cairn.dev/cairn/gitsource/forge/github"
)

var (
	repo = forge.RepoRef{Owner: "o", Name: "r"}
	shaA = strings.Repeat("a", 40)
)

// statusServer answers commit status posts with answer(n, req) for the n-th
// request (from 1) and records each request's time and status.
type statusServer struct {
	*httptest.Server
	mu    sync.Mutex
	times []time.Time
	got   []map[string]string
}

func newStatusServer(t *testing.T, answer func(n int, w http.ResponseWriter)) *statusServer {
	s := &statusServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := map[string]string{}
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "[]")
			return
		}
		body["sha"] = r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		s.mu.Lock()
		s.times = append(s.times, time.Now())
		s.got = append(s.got, body)
		n := len(s.times)
		s.mu.Unlock()
		answer(n, w)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *statusServer) requests() ([]time.Time, []map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...), append([]map[string]string(nil), s.got...)
}

func created(w http.ResponseWriter) {
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":1}`)
}

func newQueue(t *testing.T, url string, tune func(*forge.QueueOptions)) *forge.Queue {
	t.Helper()
	c, err := github.New(github.Options{BaseURL: url, Token: "t0ken", Login: "cairn"})
	if err != nil {
		t.Fatal(err)
	}
	opts := forge.DefaultQueueOptions()
	opts.InitialBackoff, opts.MaxBackoff, opts.RequestTimeout, opts.DrainTimeout = 10*time.Millisecond, 5*time.Second, 2*time.Second, 2*time.Second
	if tune != nil {
		tune(&opts)
	}
	q := forge.NewQueue(c, opts)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

func pending(ctx string) forge.Status {
	return forge.Status{Context: ctx, State: forge.StatePending}
}

func TestQueueHonoursRetryAfterOn429(t *testing.T) {
	g := NewWithT(t)
	srv := newStatusServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		created(w)
	})
	q := newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	g.Eventually(func() int { return q.Stats().Sent }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	times, _ := srv.requests()
	g.Expect(times).To(HaveLen(2))
	g.Expect(times[1].Sub(times[0])).To(BeNumerically(">=", 950*time.Millisecond), "waited for Retry-After")
	g.Expect(q.Stats().Retries).To(Equal(1))
}

// TestQueueRateLimitResetPausesEverything: a 403 with a spent quota holds
// every update until X-RateLimit-Reset.
func TestQueueRateLimitResetPausesEverything(t *testing.T) {
	g := NewWithT(t)
	var reset time.Time
	srv := newStatusServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			reset = time.Now().Add(2 * time.Second).Truncate(time.Second)
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"API rate limit exceeded"}`)
			return
		}
		created(w)
	})
	q := newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/a"))
	g.Eventually(func() int { times, _ := srv.requests(); return len(times) }).Should(Equal(1))
	q.PostStatus(repo, shaA, pending("cairn/b"))
	g.Eventually(func() int { return q.Stats().Sent }, 5*time.Second, 10*time.Millisecond).Should(Equal(2))
	times, got := srv.requests()
	g.Expect(times).To(HaveLen(3))
	for _, at := range times[1:] {
		g.Expect(at).To(BeTemporally(">=", reset.Add(-50*time.Millisecond)), "nothing sent before the reset")
	}
	g.Expect(got[1]["context"]).To(Equal("cairn/a"), "the rate-limited update goes first")
}

func TestQueueRetries5xxThenGivesUp(t *testing.T) {
	g := NewWithT(t)
	srv := newStatusServer(t, func(int, http.ResponseWriter) {})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.mu.Lock()
		srv.times = append(srv.times, time.Now())
		srv.mu.Unlock()
		w.WriteHeader(http.StatusBadGateway)
	})
	q := newQueue(t, srv.URL, func(o *forge.QueueOptions) { o.MaxAttempts = 4 })
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	g.Eventually(func() int { return q.Stats().Failed }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	times, _ := srv.requests()
	g.Expect(times).To(HaveLen(4))
	g.Expect(times[3].Sub(times[2])).To(BeNumerically(">", times[1].Sub(times[0])), "backoff grows")
	g.Consistently(func() int { times, _ := srv.requests(); return len(times) }, 200*time.Millisecond).Should(Equal(4))
}

func TestQueueRecoversAfter5xx(t *testing.T) {
	g := NewWithT(t)
	srv := newStatusServer(t, func(n int, w http.ResponseWriter) {
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		created(w)
	})
	q := newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	g.Eventually(func() int { return q.Stats().Sent }, 5*time.Second, 10*time.Millisecond).Should(Equal(1))
	g.Expect(q.Stats()).To(MatchFields(IgnoreExtras, Fields{"Retries": Equal(2), "Failed": Equal(0)}))
}

func TestQueuePermanentErrorIsNotRetried(t *testing.T) {
	g := NewWithT(t)
	srv := newStatusServer(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) })
	q := newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	g.Eventually(func() int { return q.Stats().Failed }).Should(Equal(1))
	g.Consistently(func() int { times, _ := srv.requests(); return len(times) }, 200*time.Millisecond).Should(Equal(1))
}

// hangingServer never answers until the test ends.
func hangingServer(t *testing.T) (*httptest.Server, *int64) {
	var mu sync.Mutex
	var calls int64
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	return srv, &calls
}

func TestQueueTimesOutAHangingForge(t *testing.T) {
	g := NewWithT(t)
	srv, _ := hangingServer(t)
	q := newQueue(t, srv.URL, func(o *forge.QueueOptions) { o.RequestTimeout, o.MaxAttempts = 100*time.Millisecond, 2 })
	start := time.Now()
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	for i := 0; i < 1000; i++ {
		q.PostStatus(repo, shaA, pending(fmt.Sprintf("cairn/i%d", i)))
	}
	g.Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond), "posting never waits for the forge")
	g.Eventually(func() int { return q.Stats().Failed }, 3*time.Second, 10*time.Millisecond).Should(BeNumerically(">=", 1))
}

// TestQueueFloodStaysBounded: a sync loop posting far more than the forge
// takes never blocks, and the queue holds at most Capacity updates.
func TestQueueFloodStaysBounded(t *testing.T) {
	g := NewWithT(t)
	srv, _ := hangingServer(t)
	q := newQueue(t, srv.URL, func(o *forge.QueueOptions) { o.Capacity, o.DrainTimeout = 100, 50*time.Millisecond })
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	const posts = 100000
	for i := 0; i < posts; i++ {
		q.PostStatus(repo, fmt.Sprintf("%040x", i), forge.Status{Context: "cairn/sync", State: forge.StateFailure,
			Description: strings.Repeat("d", 200)})
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := q.Stats()
	g.Expect(st.Pending).To(BeNumerically("<=", 100))
	g.Expect(st.Dropped).To(BeNumerically(">=", posts-101))
	g.Expect(elapsed).To(BeNumerically("<", 10*time.Second), "about a microsecond a post; much more under -race")
	g.Expect(int64(after.HeapAlloc)-int64(before.HeapAlloc)).To(BeNumerically("<", 16<<20), "memory stays bounded")
}

// TestQueueCoalescesSameKey: updates for one (repo, SHA, context) posted
// while another is in flight collapse into the newest.
func TestQueueCoalescesSameKey(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := newStatusServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			<-release
		}
		created(w)
	})
	q := newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	g.Eventually(func() int { times, _ := srv.requests(); return len(times) }).Should(Equal(1))
	for _, state := range []forge.State{forge.StatePending, forge.StateFailure, forge.StateSuccess} {
		q.PostStatus(repo, shaA, forge.Status{Context: "cairn/sync", State: state, Description: string(state)})
	}
	q.PostStatus(repo, shaA, pending("cairn/other"))
	close(release)
	g.Eventually(func() int { return q.Stats().Sent }).Should(Equal(3))
	_, got := srv.requests()
	g.Expect(got).To(HaveLen(3))
	g.Expect(got[1]).To(HaveKeyWithValue("state", "success"))
	g.Expect(got[1]).To(HaveKeyWithValue("context", "cairn/sync"))
	g.Expect(got[2]).To(HaveKeyWithValue("context", "cairn/other"))
	g.Expect(q.Stats().Coalesced).To(Equal(2))
}

// TestQueueNewerUpdateSupersedesARetry: an update that fails is not retried
// once a newer one for the same key is waiting.
func TestQueueNewerUpdateSupersedesARetry(t *testing.T) {
	g := NewWithT(t)
	posted := make(chan struct{})
	q := (*forge.Queue)(nil)
	srv := newStatusServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			q.PostStatus(repo, shaA, forge.Status{Context: "cairn/sync", State: forge.StateSuccess})
			close(posted)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		created(w)
	})
	q = newQueue(t, srv.URL, nil)
	q.PostStatus(repo, shaA, pending("cairn/sync"))
	<-posted
	g.Eventually(func() int { return q.Stats().Sent }).Should(Equal(1))
	_, got := srv.requests()
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[1]).To(HaveKeyWithValue("state", "success"))
	g.Expect(q.Stats()).To(MatchFields(IgnoreExtras, Fields{"Dropped": Equal(1), "Retries": Equal(0)}))
}

func TestQueueCloseDrains(t *testing.T) {
	g := NewWithT(t)
	srv := newStatusServer(t, func(_ int, w http.ResponseWriter) { created(w) })
	q := newQueue(t, srv.URL, nil)
	for i := 0; i < 5; i++ {
		q.PostStatus(repo, shaA, pending(fmt.Sprintf("cairn/%d", i)))
	}
	q.PostPlanComment(repo, 7, "plan")
	g.Expect(q.Close()).To(Succeed())
	times, _ := srv.requests()
	g.Expect(len(times)).To(Equal(5+1), "five statuses, then the comment (its listing is not counted)")
	q.PostStatus(repo, shaA, pending("late"))
	g.Expect(q.Stats().Dropped).To(Equal(1), "posted after close")
}

func TestQueueCloseGivesUpAtTheDeadline(t *testing.T) {
	g := NewWithT(t)
	srv, _ := hangingServer(t)
	q := newQueue(t, srv.URL, func(o *forge.QueueOptions) { o.DrainTimeout, o.RequestTimeout = 200*time.Millisecond, time.Minute })
	for i := 0; i < 3; i++ {
		q.PostStatus(repo, shaA, pending(fmt.Sprintf("cairn/%d", i)))
	}
	start := time.Now()
	err := q.Close()
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
	g.Expect(err).To(MatchError(ContainSubstring("failed to deliver 2 forge updates")))
}

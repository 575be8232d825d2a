package forge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"cairn.dev/cairn/gitsource"
	"github.com/go-logr/logr"
)

// QueueOptions tune a Queue.
type QueueOptions struct {
	// Capacity bounds the updates waiting to be sent. When it is reached, a
	// new update (one that does not coalesce with a waiting one) drops the
	// oldest waiting update. Updates for the same key coalesce in place, so
	// the bound only bites when more distinct keys than Capacity wait.
	Capacity int
	// MaxAttempts bounds the sends of one update; after the last failed one
	// the update is dropped and counted as Failed.
	MaxAttempts int
	// InitialBackoff is the wait after the first retryable failure; it doubles
	// with each further failure up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps every wait, including one the forge asked for with
	// Retry-After or a rate-limit reset time.
	MaxBackoff time.Duration
	// RequestTimeout bounds one call to the Forge, so that a forge that
	// hangs cannot hold the queue.
	RequestTimeout time.Duration
	// DrainTimeout bounds Close: updates still waiting when it passes are
	// dropped and the call in flight is cancelled.
	DrainTimeout time.Duration
	// Logger receives a line per abandoned update, and for drops from a
	// full queue a line at the 1st, 2nd, 4th, 8th... drop.
	Logger logr.Logger
}

// DefaultQueueOptions returns the defaults: 1000 updates, 8 attempts, backoff
// from 1 s doubling to 5 min, 30 s per request, 10 s to drain on Close.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		Capacity:       1000,
		MaxAttempts:    8,
		InitialBackoff: time.Second,
		MaxBackoff:     5 * time.Minute,
		RequestTimeout: 30 * time.Second,
		DrainTimeout:   10 * time.Second,
		Logger:         logr.Discard(),
	}
}

func (o QueueOptions) withDefaults() QueueOptions {
	d := DefaultQueueOptions()
	if o.Capacity <= 0 {
		o.Capacity = d.Capacity
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = d.InitialBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = d.MaxBackoff
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = d.RequestTimeout
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = d.DrainTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = d.Logger
	}
	return o
}

// QueueStats counts what a Queue did with the updates it was given.
type QueueStats struct {
	// Pending updates wait to be sent (not counting one in flight).
	Pending int
	// Sent updates reached the forge.
	Sent int
	// Coalesced updates replaced a waiting update for the same key.
	Coalesced int
	// Dropped updates were pushed out by a full queue, superseded while
	// retrying, posted after Close, or still waiting when Close gave up.
	Dropped int
	// Failed updates were given up: a permanent error or MaxAttempts reached.
	Failed int
	// Retries counts sends repeated after a retryable failure.
	Retries int
}

// Queue posts commit statuses and plan comments to a Forge from one
// goroutine, so that a sync never waits on the forge and never fails because
// of it. Posting never blocks: updates for the same key (repository, SHA and
// status context; or repository and pull request for the plan comment)
// coalesce, the newest winning, and a full queue drops its oldest update.
// Failures are retried with exponential backoff when retryable (rate limits,
// 5xx, transport errors and timeouts); a rate limit pauses the whole queue
// until the forge's reset time, since it applies to every request. One
// update at a time is sent, in the order keys were first posted, which is
// also what GitHub asks of integrations that create content.
type Queue struct {
	forge Forge
	opts  QueueOptions

	mu         sync.Mutex
	pending    []*job
	byKey      map[string]*job
	pauseUntil time.Time
	closed     bool
	stats      QueueStats
	wake       chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// job is one update waiting or in flight.
type job struct {
	key       string
	keys      []any // logged with every line about the update: revision, context, instance or pr
	what      func() string
	send      func(ctx context.Context, f Forge) error
	attempts  int
	notBefore time.Time
}

// NewQueue starts a Queue posting to f. Call Close to stop it.
func NewQueue(f Forge, opts QueueOptions) *Queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		forge: f, opts: opts.withDefaults(),
		byKey: map[string]*job{}, wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
	go q.run()
	return q
}

// PostStatus queues commit status st for sha. It never blocks.
func (q *Queue) PostStatus(repo RepoRef, sha string, st Status) {
	q.post(&job{
		key:  "status\x00" + repo.String() + "\x00" + sha + "\x00" + st.Context,
		keys: statusKeys(repo, sha, st.Context),
		what: func() string {
			return fmt.Sprintf("status %s=%s on %s@%s", st.Context, st.State, repo, gitsource.ShortSHA(sha))
		},
		send: func(ctx context.Context, f Forge) error { return f.SetStatus(ctx, repo, sha, st) },
	})
}

// PostPlanComment queues the plan comment body for pull request pr. It never
// blocks.
func (q *Queue) PostPlanComment(repo RepoRef, pr int, body string) {
	q.post(&job{
		key:  "comment\x00" + repo.String() + "\x00" + strconv.Itoa(pr),
		keys: []any{"repository", repo.String(), "pr", pr},
		what: func() string { return fmt.Sprintf("plan comment on %s#%d", repo, pr) },
		send: func(ctx context.Context, f Forge) error { return f.UpsertPlanComment(ctx, repo, pr, body) },
	})
}

// Stats returns the queue's counters.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Pending = len(q.pending)
	return s
}

func (q *Queue) post(j *job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.stats.Dropped++
		q.opts.Logger.Info("dropped a forge update posted after close", append([]any{"update", j.what()}, j.keys...)...)
		return
	}
	if old, ok := q.byKey[j.key]; ok {
		old.what, old.send, old.attempts = j.what, j.send, 0
		q.stats.Coalesced++
		return
	}
	if len(q.pending) >= q.opts.Capacity {
		q.dropOldest()
	}
	q.pending = append(q.pending, j)
	q.byKey[j.key] = j
	q.signal()
}

func (q *Queue) dropOldest() {
	oldest := q.pending[0]
	q.pending[0] = nil
	q.pending = q.pending[1:]
	delete(q.byKey, oldest.key)
	q.stats.Dropped++
	if d := q.stats.Dropped; d&(d-1) == 0 { // log the 1st, 2nd, 4th, 8th... drop: a flood cannot flood the log
		q.opts.Logger.Info("dropped a forge update: queue full",
			append([]any{"update", oldest.what(), "capacity", q.opts.Capacity, "dropped", d}, oldest.keys...)...)
	}
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// statusKeys are the log keys of a commit status: the revision, the context and, for
// a per-instance context (cairn/<namespace>/<name>), the instance.
func statusKeys(repo RepoRef, sha, context string) []any {
	keys := []any{"repository", repo.String(), "revision", sha, "context", context}
	if rest, ok := strings.CutPrefix(context, "cairn/"); ok && strings.Count(rest, "/") == 1 {
		keys = append(keys, "instance", rest)
	}
	return keys
}

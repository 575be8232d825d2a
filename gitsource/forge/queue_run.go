package forge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is the queue's one worker.
func (q *Queue) run() {
	defer close(q.done)
	for {
		j, ok := q.next()
		if !ok {
			return
		}
		err := q.attempt(j)
		q.finish(j, err)
	}
}

// next waits for the first update that may be sent now. It returns false
// when the queue is closed and empty, or when Close's deadline passed.
func (q *Queue) next() (*job, bool) {
	for {
		q.mu.Lock()
		if q.ctx.Err() != nil || (q.closed && len(q.pending) == 0) {
			q.mu.Unlock()
			return nil, false
		}
		j, wait := q.ready(time.Now())
		q.mu.Unlock()
		if j != nil {
			return j, true
		}
		if !q.sleep(wait) {
			return nil, false
		}
	}
}

// ready removes and returns the first update whose backoff has passed, or
// says how long to wait for one. Called with q.mu held.
func (q *Queue) ready(now time.Time) (*job, time.Duration) {
	if now.Before(q.pauseUntil) {
		return nil, q.pauseUntil.Sub(now)
	}
	wait := time.Duration(-1)
	for i, j := range q.pending {
		if !now.Before(j.notBefore) {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			delete(q.byKey, j.key)
			return j, 0
		}
		if d := j.notBefore.Sub(now); wait < 0 || d < wait {
			wait = d
		}
	}
	return nil, wait
}

// sleep waits for wait (forever when negative), a new update or the end of
// the drain deadline. It returns false when the queue must stop.
func (q *Queue) sleep(wait time.Duration) bool {
	var timer <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
	case <-q.wake:
	case <-q.ctx.Done():
		return false
	}
	return true
}

func (q *Queue) attempt(j *job) error {
	ctx, cancel := context.WithTimeout(q.ctx, q.opts.RequestTimeout)
	defer cancel()
	j.attempts++
	return j.send(ctx, q.forge)
}

// finish counts a sent update, or schedules its retry, or gives it up.
func (q *Queue) finish(j *job, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err == nil {
		q.stats.Sent++
		return
	}
	log := q.opts.Logger.WithValues(append([]any{"update", j.what(), "attempt", j.attempts}, j.keys...)...)
	retry, wait := Retryable(err)
	switch {
	case q.byKey[j.key] != nil:
		q.stats.Dropped++
		log.V(1).Info("dropped a failed forge update: a newer one replaces it", "error", err.Error())
	case !retry || q.ctx.Err() != nil:
		q.stats.Failed++
		log.Error(err, "gave up a forge update", "reason", reason(err))
	case j.attempts >= q.opts.MaxAttempts:
		q.stats.Failed++
		log.Error(err, fmt.Sprintf("gave up a forge update after %d attempts", j.attempts), "reason", reason(err))
	default:
		q.requeue(j, q.backoff(j.attempts, wait), IsRateLimited(err))
		log.V(1).Info("will retry a forge update", "error", err.Error(), "after", j.notBefore.Sub(time.Now()).Round(time.Millisecond))
	}
}

// requeue puts j back at the head of the queue after delay; a rate limit
// pauses the whole queue for that long.
func (q *Queue) requeue(j *job, delay time.Duration, rateLimited bool) {
	j.notBefore = time.Now().Add(delay)
	if rateLimited {
		q.pauseUntil = j.notBefore
	}
	if len(q.pending) >= q.opts.Capacity {
		q.dropOldest()
	}
	q.pending = append([]*job{j}, q.pending...)
	q.byKey[j.key] = j
	q.stats.Retries++
}

// backoff is InitialBackoff doubled per earlier attempt, or what the forge
// asked for when that is longer, capped by MaxBackoff.
func (q *Queue) backoff(attempts int, asked time.Duration) time.Duration {
	d := q.opts.InitialBackoff
	for i := 1; i < attempts && d < q.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(max(d, asked), q.opts.MaxBackoff)
}

// Close stops taking updates, sends what is waiting for up to DrainTimeout,
// then cancels the call in flight and drops the rest. It returns an error
// saying how many updates were not delivered at close, nil when none.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		<-q.done
		return nil
	}
	q.closed = true
	q.signal()
	q.mu.Unlock()
	timer := time.NewTimer(q.opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-q.done:
	case <-timer.C:
		q.cancel()
		<-q.done
	}
	q.cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	left := len(q.pending)
	q.stats.Dropped += left
	q.pending, q.byKey = nil, map[string]*job{}
	if left > 0 {
		return fmt.Errorf("failed to deliver %d forge updates before the %s drain deadline", left, q.opts.DrainTimeout)
	}
	return nil
}

func reason(err error) string {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Reason()
	}
	if errors.Is(err, ErrInvalid) {
		return "ForgeInvalidRequest"
	}
	return ReasonUnavailable
}

package render

import (
	"context"
	"sync"
	"time"
)

// renderInProcess evaluates in this process, the prepared module from the
// Renderer's cache when it is there.
func (r *Renderer) renderInProcess(ctx context.Context, req Request, limits Limits, key preparedKey, local *moduleSource, pins *pinner) (evaluated, error) {
	prepared := r.prepared.get(key)
	var load func() (*preparedModule, error)
	if prepared == nil {
		var err error
		if load, err = r.loader(ctx, req, limits, local, pins); err != nil {
			return evaluated{}, err
		}
	}
	// Evaluate and export, under the deadline (loading too, when needed).
	return r.bounded(ctx, limits, func() (evaluated, error) {
		return r.evaluatePrepared(key, prepared, load, newRenderInput(req, limits))
	})
}

// evaluatePrepared loads and keeps the module when it is not prepared yet,
// and evaluates it with the render's instance and values in a CUE context
// of the pool.
func (r *Renderer) evaluatePrepared(key preparedKey, p *preparedModule, load func() (*preparedModule, error), in renderInput) (evaluated, error) {
	if p == nil {
		var err error
		if p, err = load(); err != nil {
			return evaluated{}, err
		}
		r.prepared.add(key, p)
	}
	c := r.contexts.get()
	start := time.Now()
	objs, err := evaluate(p, c.ctx, in)
	if err == nil {
		r.contexts.put(c, time.Since(start))
	}
	return evaluated{objs, p.digest, p.warnings}, err
}

// bounded runs fn in its own goroutine under a running slot, and returns
// RenderTimeout when ctx ends first; the evaluation is then abandoned (see
// RendererOptions).
func (r *Renderer) bounded(ctx context.Context, limits Limits, fn func() (evaluated, error)) (evaluated, error) {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return evaluated{}, timeoutError(ctx, limits, "while waiting for an evaluation slot (earlier evaluations are still running past their deadline)")
	}
	type outcome struct {
		out evaluated
		err error
	}
	done := make(chan outcome, 1)
	ev := &evaluation{r: r}
	go func() {
		defer ev.finish()
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: newError(ReasonRenderFailed, "CUE evaluation panicked: %v", p)}
			}
		}()
		out, err := fn()
		done <- outcome{out, err}
	}()
	select {
	case o := <-done:
		return o.out, o.err
	case <-ctx.Done():
		ev.abandon()
		return evaluated{}, timeoutError(ctx, limits, "during CUE evaluation")
	}
}

// evaluation tracks which pool one evaluation's slot is in.
type evaluation struct {
	r         *Renderer
	mu        sync.Mutex
	abandoned bool
	finished  bool
}

// abandon moves the evaluation to the abandoned pool when it has room,
// freeing its running slot.
func (e *evaluation) abandon() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return
	}
	select {
	case e.r.abandoned <- struct{}{}:
		<-e.r.slots
		e.abandoned = true
	default:
	}
}

// finish releases the evaluation's slot, in whichever pool it is.
func (e *evaluation) finish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.abandoned {
		<-e.r.abandoned
	} else {
		<-e.r.slots
	}
	e.finished = true
}

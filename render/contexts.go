package render

import (
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// Reuse bounds of a CUE context (see contextPool).
const (
	maxContextUses = 16
	maxContextBusy = 10 * time.Millisecond
)

// contextPool keeps CUE contexts between renders. A package built in a new
// context compiles again every builtin package it imports (list, strings,
// ...): a seventh of the CPU and a third of the allocations of a render of
// the webapp example. A context used before has them.
//
// A context serves one render at a time (CUE contexts are not safe for
// concurrent mutation): get hands it out exclusively, and put takes it back
// once the render has finished with its values (the objects are exported to
// JSON). A render's packages are built from
// its own copies of the instances (preparedModule.build), so renders sharing
// a context share only the builtin packages, which CUE finalizes when it
// loads them.
//
// A context keeps every package built in it, as CUE cannot drop one, so it
// is reused only after successful and quick evaluations, for at most
// maxContextUses renders and maxContextBusy of evaluation in all: what it
// holds is bounded by what that much evaluation allocates.
type contextPool struct {
	free chan *pooledContext
}

type pooledContext struct {
	ctx  *cue.Context
	uses int
	busy time.Duration
}

// newContextPool keeps at most size idle contexts.
func newContextPool(size int) *contextPool {
	return &contextPool{free: make(chan *pooledContext, size)}
}

// get returns an idle context, or a new one.
func (p *contextPool) get() *pooledContext {
	select {
	case c := <-p.free:
		return c
	default:
		return &pooledContext{ctx: cuecontext.New()}
	}
}

// put takes back a context after a successful render that evaluated in it
// for took; a context past its bounds, or beyond the idle ones kept, is
// dropped.
func (p *contextPool) put(c *pooledContext, took time.Duration) {
	c.uses++
	c.busy += took
	if c.uses >= maxContextUses || c.busy >= maxContextBusy {
		return
	}
	select {
	case p.free <- c:
	default:
	}
}

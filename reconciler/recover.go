package reconciler

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"unicode/utf8"

	cairnv1 "cairn.dev/cairn/api/v1alpha1"
	"cairn.dev/cairn/reconciler/outcome"
)

// A panic while one instance is rendered, placed or applied is a bug in cairn (or in
// a library it calls), not in the instance's declaration: it is recovered, the
// instance fails with InternalError (Stalled: retried on the next commit and by the
// periodic recheck), the stack goes to the log only, and the other instances of the
// sync go on.

// instanceTestHook is called as each instance starts a phase; see SetInstanceTestHook.
var instanceTestHook atomic.Pointer[func(phase, key string)]

// Phases passed to the hook of SetInstanceTestHook.
const (
	PhaseRender = "render"
	PhaseApply  = "apply"
)

// SetInstanceTestHook makes fn be called as each instance starts its render
// (PhaseRender) and its apply (PhaseApply), with the instance's namespace/name, until
// the returned function is called. It is for tests (a hook that panics for one
// instance); nothing in a repository or the cluster can set it.
func SetInstanceTestHook(fn func(phase, key string)) (reset func()) {
	instanceTestHook.Store(&fn)
	return func() { instanceTestHook.CompareAndSwap(&fn, nil) }
}

func testHook(phase, key string) {
	if fn := instanceTestHook.Load(); fn != nil {
		(*fn)(phase, key)
	}
}

// maxPanicMessage bounds the panic value quoted in an instance's status.
const maxPanicMessage = 256

// panicSummary names a recovered panic without its data: the Go runtime's own
// message (a nil dereference, an index out of range: types and numbers only), else
// only the type of the value, since a value built by a library from the render
// (a string, an error) could carry a rendered Secret's data into status and logs.
func panicSummary(v any) string {
	if re, ok := v.(runtime.Error); ok {
		return truncate(re.Error(), maxPanicMessage)
	}
	return fmt.Sprintf("a panic with a value of type %T", v)
}

// recovered is the failure of the instance key for the panic v recovered while it
// was in phase; the stack is logged, never put in the failure.
func (in *revisionInput) recovered(ctx context.Context, key, phase string, v any) *outcome.Failure {
	msg := panicSummary(v)
	in.e.logger(ctx).Error(fmt.Errorf("panic: %s", msg), "recovered a panic: the instance fails with InternalError",
		"instance", key, "revision", in.rev.SHA, "phase", phase, "stack", string(debug.Stack()))
	return outcome.NewStalled(cairnv1.ReasonInternalError, fmt.Errorf(
		"internal error during the %s of %s: %s (a bug in cairn; the stack is in cairn's log)", phase, key, msg))
}

// recoverInto, deferred, turns a panic of r's phase into r's failure.
func (in *revisionInput) recoverInto(ctx context.Context, r *instanceState, phase string) {
	if v := recover(); v != nil {
		r.failure = in.recovered(ctx, r.key(), phase, v)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

package render

import (
	"context"

	"cuelang.org/go/mod/modfile"
	"cuelang.org/go/mod/module"
)

// renderInWorker evaluates in one of the Renderer's worker processes. The
// worker has the module prepared or asks for it: the module is then fetched
// here (registry access and credentials never leave this process) and sent
// with its dependencies. At the deadline the worker is killed.
func (r *Renderer) renderInWorker(ctx context.Context, req Request, limits Limits, key preparedKey, local *moduleSource, pins *pinner) (evaluated, error) {
	w, err := r.pool.acquire(ctx, req.Tenant)
	if err != nil {
		if ctx.Err() != nil {
			return evaluated{}, busyError(ctx, limits)
		}
		return evaluated{}, err
	}
	job := &workerJob{Key: key.id(), Name: req.Name, Namespace: req.Namespace, Values: req.Values, Limits: limits,
		MaxPrepared: r.opts.MaxPreparedModules, MaxPreparedBytes: r.opts.MaxPreparedBytes}
	h := &moduleHandler{r: r, ctx: ctx, req: req, limits: limits, local: local, pins: pins}
	m, keep, err := w.call(ctx, workerMessage{Render: job}, limits.Memory, h)
	r.pool.release(w, keep, req.Tenant)
	switch {
	case err != nil && !keep && ctx.Err() != nil:
		return evaluated{}, timeoutError(ctx, limits, "during CUE evaluation (its worker process was stopped)")
	case err != nil:
		return evaluated{}, r.explainCap(err, req.Limits.withDefaults().Memory, limits.Memory)
	case m.Result == nil:
		return evaluated{}, newError(ReasonRenderFailed, "render worker answered a CUE render with no result")
	}
	return m.Result.evaluated(), nil
}

// moduleHandler answers a worker's questions about the module of one render.
type moduleHandler struct {
	r      *Renderer
	ctx    context.Context
	req    Request
	limits Limits
	local  *moduleSource
	pins   *pinner
	deps   *depSet
}

// module fetches the module and its dependencies for the worker.
func (h *moduleHandler) module() (*workerModule, error) {
	src, deps, err := h.r.fetchModule(h.ctx, h.req, h.limits, h.local, h.pins)
	if err != nil {
		return nil, err
	}
	h.deps = deps
	h.r.pool.sent.Add(1)
	return newWorkerModule(src, deps, h.pins)
}

// modFile reads the module file of a version the module does not list, as
// the registry has it: the worker pins it.
func (h *moduleHandler) modFile(s string) ([]byte, error) {
	mv, err := module.ParseVersion(s)
	if err != nil {
		return nil, newError(ReasonModuleNotFound, "invalid module version %q: %w", s, err)
	}
	if h.deps == nil {
		return nil, newError(ReasonModuleNotFound, "module %s is not a dependency of the module", mv)
	}
	mf, err := h.deps.unlisted(mv)
	if err != nil {
		return nil, err
	}
	data, err := modfile.Format(mf)
	if err != nil {
		return nil, newError(ReasonRenderFailed, "failed to write the module file of %s: %w", mv, err)
	}
	return data, nil
}

// capWorkerMemory is limits with the memory budget capped at MaxWorkerMemory.
func (r *Renderer) capWorkerMemory(limits Limits) Limits {
	if c := r.opts.MaxWorkerMemory; c > 0 && limits.Memory > c {
		limits.Memory = c
	}
	return limits
}

// explainCap says, of a render over a budget that MaxWorkerMemory lowered, that
// the render asked for more.
func (r *Renderer) explainCap(err error, asked, budget int64) error {
	if asked <= budget || Reason(err) != ReasonLimitExceeded {
		return err
	}
	return newError(ReasonLimitExceeded, "%w (renderMemory asks for %s, more than the %s this cairn gives a render worker: --render-memory)",
		err, formatBytes(asked), formatBytes(budget))
}

package render

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// chartResult is a chart render's Result on the wire.
type chartResult struct {
	Objects      []json.RawMessage `json:"objects"`
	Digest       string            `json:"digest"`
	ModuleDigest string            `json:"moduleDigest"`
	Warnings     []string          `json:"warnings,omitempty"`
	Lookups      int64             `json:"lookups,omitempty"`
	Hooks        []Hook            `json:"hooks,omitempty"`
}

func toChartResult(res *Result) (*chartResult, error) {
	out := &chartResult{Digest: res.Digest, ModuleDigest: res.ModuleDigest, Warnings: res.Warnings, Lookups: res.Lookups,
		Hooks: res.Hooks}
	for _, u := range res.Objects {
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, newError(ReasonInvalidObject, "failed to encode %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		out.Objects = append(out.Objects, data)
	}
	return out, nil
}

func (c *chartResult) result() (*Result, error) {
	res := &Result{Digest: c.Digest, ModuleDigest: c.ModuleDigest, Warnings: c.Warnings, Lookups: c.Lookups, Hooks: c.Hooks}
	for _, data := range c.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, newError(ReasonInvalidObject, "failed to decode an object of the render worker: %w", err)
		}
		res.Objects = append(res.Objects, u)
	}
	return res, nil
}

// RenderChart renders a chart as the package's RenderChart does, in one of
// the Renderer's worker processes: within the render's memory budget
// (Limits.Memory, LimitExceeded beyond it) and killed at its deadline, so
// that no template runs on. With InProcess it is RenderChart.
func (r *Renderer) RenderChart(ctx context.Context, req ChartRequest) (*Result, error) {
	if r.pool == nil {
		return RenderChart(ctx, req)
	}
	res, err := r.renderChartInWorker(ctx, req)
	return res, chartError(req.Chart, err)
}

func (r *Renderer) renderChartInWorker(ctx context.Context, req ChartRequest) (*Result, error) {
	limits := req.Limits.withDefaults()
	if n := int64(len(req.Archive)); n > defaultArchiveLimits.archiveBytes {
		return nil, newError(ReasonLimitExceeded, "archive is %d bytes, more than the %d-byte cap", n, defaultArchiveLimits.archiveBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	w, err := r.pool.acquire(ctx, req.Tenant)
	if err != nil {
		if ctx.Err() != nil {
			return nil, busyError(ctx, limits)
		}
		return nil, err
	}
	req.Limits = limits
	m, keep, err := w.call(ctx, workerMessage{Chart: &req, ChartLookup: req.Lookup != nil}, limits.Memory, chartHandler{lookup: req.Lookup})
	r.pool.release(w, keep, req.Tenant)
	switch {
	case err != nil && !keep && ctx.Err() != nil:
		return nil, timeoutError(ctx, limits, "while rendering the chart (its worker process was stopped)")
	case err != nil:
		return nil, err
	case m.ChartResult == nil:
		return nil, newError(ReasonRenderFailed, "render worker answered a chart render with no result")
	}
	return m.ChartResult.result()
}

// serveChart renders a chart in the worker, under its memory budget; the
// parent keeps the deadline.
func (s *workerServer) serveChart(req *ChartRequest, lookup bool) workerMessage {
	if lookup {
		req.Lookup = s.askLookup
	}
	s.startBudget(req.Limits.Memory, 0, 0)
	defer s.budget.Store(0)
	res, err := renderChartSteps(*req, req.Limits.withDefaults(), defaultArchiveLimits)
	if err == nil {
		var out *chartResult
		if out, err = toChartResult(res); err == nil {
			return workerMessage{ChartResult: out}
		}
	}
	return workerMessage{Error: toWorkerError(err)}
}
